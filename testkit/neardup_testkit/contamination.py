"""Decontamination's brute-force reference, and corpora with planted evaluation data.

Independent of neardup like `reference.py` (which it builds on): plain Python words,
tuples and sets, no hashing, no banding. Semantics (docs/design.md, "Decontamination"):

- words: of the text normalized as `reference.normalize` does, split at spaces; a
  document shares an n-gram with a reference item when n consecutive words of one are n
  consecutive words of the other; the n-gram reported is the document's first such one
  (in its word order), joined by single spaces;
- near-duplicate: exact Jaccard of the two shingle sets (`reference.shingles`, dedup's
  definition) at or above the threshold, over every (document, reference item) pair that
  shares a shingle (the others have Jaccard 0);
- a null text, or one empty once normalized, is rejected and matches nothing.

`plant` makes a corpus (`synth.generate`) and a reference set (`synth.generate` under
another seed, string ids) and plants in the corpus: light-edit copies of reference items
(a few words substituted: Jaccard of shingles well above 0.8), runs of n words of
reference items inside longer unrelated documents, and decoys that share n - 1 words in
a row with a reference item and nothing more.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from neardup_testkit.reference import jaccard, normalize, shingles
from neardup_testkit.synth import CorpusSpec, generate

NEAR, NGRAM = "near_duplicate", "ngram"
Match = tuple[Any, Any, str]  # (document id, reference id, reason)


def words(text: str | None, lowercase: bool = True, strip_punctuation: bool = False) -> list[str]:
    norm = normalize(text or "", lowercase, strip_punctuation)
    return norm.split(" ") if norm else []


def ngram_index(
    refs: Mapping[Hashable, str | None], n: int, lowercase: bool = True, strip_punctuation: bool = False
) -> dict[tuple[str, ...], set[Hashable]]:
    """Every n-gram (a tuple of words) of the reference items -> the items holding it."""
    index: dict[tuple[str, ...], set[Hashable]] = defaultdict(set)
    for ref_id, text in refs.items():
        w = words(text, lowercase, strip_punctuation)
        for j in range(len(w) - n + 1):
            index[tuple(w[j : j + n])].add(ref_id)
    return index


def first_shared_ngrams(
    text: str | None,
    index: Mapping[tuple[str, ...], set[Hashable]],
    n: int,
    lowercase: bool = True,
    strip_punctuation: bool = False,
) -> dict[Hashable, str]:
    """Reference id -> the document's first n-gram (in its order) that the item holds."""
    found: dict[Hashable, str] = {}
    w = words(text, lowercase, strip_punctuation)
    for j in range(len(w) - n + 1):
        for ref_id in index.get(tuple(w[j : j + n]), ()):
            found.setdefault(ref_id, " ".join(w[j : j + n]))
    return found


def expected_matches(
    docs: Mapping[Hashable, str | None],
    refs: Mapping[Hashable, str | None],
    n: int | None = 13,
    threshold: float | None = 0.8,
    lowercase: bool = True,
    strip_punctuation: bool = False,
    shingle_n: int = 5,
    char_n: int = 5,
) -> dict[Match, float | str]:
    """(document, reference item, reason) -> the similarity (near_duplicate) or the first
    shared n-gram (ngram), for every match; `n` or `threshold` None turns that test off."""
    out: dict[Match, float | str] = {}
    if n is not None:
        index = ngram_index(refs, n, lowercase, strip_punctuation)
        for doc_id, text in docs.items():
            for ref_id, gram in first_shared_ngrams(text, index, n, lowercase, strip_punctuation).items():
                out[(doc_id, ref_id, NGRAM)] = gram
    if threshold is not None:

        def sets(texts: Mapping[Hashable, str | None]) -> dict[Hashable, frozenset[Any]]:
            return {
                i: shingles(t or "", "word", shingle_n, char_n, lowercase, strip_punctuation)
                for i, t in texts.items()
            }

        ref_sets = sets(refs)
        holders: dict[Any, set[Hashable]] = defaultdict(set)
        for ref_id, s in ref_sets.items():
            for sh in s:
                holders[sh].add(ref_id)
        for doc_id, s in sets(docs).items():
            for ref_id in set().union(*(holders.get(sh, set()) for sh in s)):
                j = jaccard(s, ref_sets[ref_id])
                if j >= threshold:
                    out[(doc_id, ref_id, NEAR)] = j
    return out


def rejected_ids(
    docs: Mapping[Hashable, str | None], lowercase: bool = True, strip: bool = False
) -> set[Hashable]:
    """Documents that cannot be processed: null text, or empty once normalized."""
    return {i for i, t in docs.items() if t is None or not normalize(t, lowercase, strip)}


# --- planted corpora ------------------------------------------------------------------------


@dataclass(frozen=True)
class PlantSpec:
    corpus_docs: int = 1500
    reference_items: int = 60
    edited_copies: int = 15
    inserted_runs: int = 15
    decoys: int = 15
    ngram: int = 13
    edits: int = 3  # words substituted in an edited copy
    seed: int = 0


@dataclass(frozen=True)
class Planted:
    corpus: pa.Table  # synth's columns; planted rows keep their id and get a new text
    reference: pa.Table  # id (string), text
    truth: set[Match]  # what was planted, by construction
    decoys: set[Any]  # document ids that share n - 1 words in a row with an item, nothing more


def plant(spec: PlantSpec) -> Planted:
    rng = random.Random(spec.seed)
    ref_table = generate(
        CorpusSpec(
            num_docs=spec.reference_items,
            seed=spec.seed + 1000,
            mean_chars=1800,
            min_chars=1200,
            max_chars=4000,
            dup_fraction=0.0,
        )
    )
    ref_ids = [f"eval-{i:04d}" for i in range(spec.reference_items)]
    ref_texts = ref_table.column("text").to_pylist()
    reference = pa.table({"id": pa.array(ref_ids), "text": pa.array(ref_texts)})
    corpus = generate(CorpusSpec(num_docs=spec.corpus_docs, seed=spec.seed, mean_chars=700, dup_fraction=0.2))
    ids = corpus.column("id").to_pylist()
    texts = corpus.column("text").to_pylist()
    needed = spec.edited_copies + spec.inserted_runs + spec.decoys
    if needed > len(ids) or spec.reference_items < 1:
        raise ValueError("not enough corpus documents or reference items to plant into")
    rows = rng.sample(range(len(ids)), needed)
    truth: set[Match] = set()
    decoys: set[Any] = set()
    for k, row in enumerate(rows):
        r = rng.randrange(spec.reference_items)
        if k < spec.edited_copies:
            texts[row] = _edited_copy(rng, ref_texts[r], spec.edits)
            truth |= {(ids[row], ref_ids[r], NEAR), (ids[row], ref_ids[r], NGRAM)}
        elif k < spec.edited_copies + spec.inserted_runs:
            texts[row] = _inserted(rng, texts[row], words(ref_texts[r]), spec.ngram)
            truth.add((ids[row], ref_ids[r], NGRAM))
        else:
            texts[row] = _inserted(rng, texts[row], words(ref_texts[r]), spec.ngram - 1, isolated=True)
            decoys.add(ids[row])
    corpus = corpus.set_column(corpus.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
    return Planted(corpus, reference, truth, decoys)


def _edited_copy(rng: random.Random, text: str, edits: int) -> str:
    """The text with `edits` words, spread over it, replaced by words found nowhere else."""
    tokens = text.split()
    step = len(tokens) // (edits + 1)
    for e in range(edits):
        tokens[step * (e + 1)] = f"zq{rng.randrange(10**9)}x"
    return " ".join(tokens)


def _inserted(
    rng: random.Random, host: str, ref_words: list[str], length: int, isolated: bool = False
) -> str:
    """`host` with `length` consecutive words of the reference item inserted between two of
    its words. `isolated`: the host's words on either side differ from the item's words on
    either side of the run, so the shared run is exactly `length` words long."""
    host_words = host.split()
    for _ in range(1000):
        s = rng.randrange(len(ref_words) - length + 1)
        at = rng.randrange(len(host_words) + 1)
        before = host_words[at - 1].lower() if at else None
        after = host_words[at].lower() if at < len(host_words) else None
        ref_before = ref_words[s - 1] if s else None
        ref_after = ref_words[s + length] if s + length < len(ref_words) else None
        if not isolated or (
            (before is None or ref_before is None or before != ref_before)
            and (after is None or ref_after is None or after != ref_after)
        ):
            return " ".join(host_words[:at] + ref_words[s : s + length] + host_words[at:])
    raise RuntimeError("no isolated place to insert the run")
