"""A skewed corpus: a base corpus (`synth`) plus one boilerplate page copied many times and
many clusters of many near copies each, for the skew benchmark and tests.

What a crawl holds and the base corpus does not: a cookie notice on millions of pages, each
copy a word or two apart from the next (exact copies are settled before LSH, so the skew
that reaches LSH, verification and components is near-identical copies). `SkewSpec` adds:

- `copies` near-identical copies of the notice below (177 words of English): the first
  is the notice itself, every other one has one or two of its words replaced by a word of
  the generator's vocabulary (uniformly drawn, so copies rarely coincide). Every copy
  keeps word-5-gram Jaccard >= (G - 10) / (G + 10) = 0.89 with the notice (G = its 173
  5-grams): one replaced word changes at most 5 of them;
- `clusters` clusters of `cluster_size` documents: a base drawn as the base corpus draws
  its documents (150-400 words) and `cluster_size - 1` copies with one or two words
  replaced, hence Jaccard >= 0.87 with their base.

So each planted group is one true component joined through its base (which is in the
corpus): the ground truth needs only each copy's Jaccard to its base (`truth.skewed_truth`),
never all pairs of a 100,000-document group. The skew documents are spread evenly through
the base corpus's row order (`skewed_batches`), with their own shuffled sparse ids above the
base corpus's, and `cluster` ids from `CLUSTER_OFFSET` (the notice) on. `target_jaccard` is
null for each group's base (the notice itself, each cluster's base) and, for a copy, the
bound its e replaced words keep, (G - 5e) / (G + 5e) with G = its base's words - 4 (the
truth measures the exact values). Deterministic for a spec, like `synth`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup_testkit import synth
from neardup_testkit.synth import SCHEMA, CorpusSpec

# Cluster ids of the skew documents: the notice's copies are CLUSTER_OFFSET, planted
# cluster j is CLUSTER_OFFSET + 1 + j (far above any base corpus's cluster count).
CLUSTER_OFFSET = 1 << 40

# Written for this generator: a typical consent banner's wording, no one site's.
NOTICE = (
    "We use cookies and similar technologies to run this website, to remember your "
    "settings, to understand how visitors use our pages and to show you content and offers "
    "that may interest you. Some cookies are strictly necessary: without them the site "
    "cannot work, so they cannot be switched off. Others are optional and are only set if "
    "you agree. Analytics cookies count visits and traffic sources so that we can measure "
    "and improve the performance of our site. Functional cookies remember the choices you "
    "make, such as your language or the region you are in. Advertising cookies may be set "
    "by our partners to build a profile of your interests and show you relevant adverts on "
    "other sites. You can accept all cookies, reject the optional ones, or choose which "
    "categories to allow by selecting Manage preferences. You can change your mind at any "
    "time from the link at the bottom of every page. For more information about the "
    "cookies we use and how long we keep them, please read our Cookie Policy and our "
    "Privacy Notice."
)

_CLUSTER_WORDS = (150, 400)  # length of a planted cluster's base, in words
_ROWS = 8192  # skew rows rendered at a time


@dataclass(frozen=True)
class SkewSpec:
    """What to add to a base corpus. Every field is part of the determinism key."""

    copies: int  # near-identical copies of the notice (the unedited notice among them)
    clusters: int = 0  # planted clusters of near copies
    cluster_size: int = 100  # documents per planted cluster (its base among them)
    seed: int = 0
    id_offset: int = 1 << 50  # skew ids start here: above any base corpus's ids
    id_mean_gap: int = 16

    def __post_init__(self) -> None:
        checks = [
            (self.copies >= 0 and self.clusters >= 0, "copies and clusters must be >= 0"),
            (self.cluster_size >= 2, "cluster_size must be >= 2"),
            (self.seed >= 0, "seed must be >= 0"),
            (self.id_mean_gap >= 1 and self.id_offset >= 0, "bad id_offset or id_mean_gap"),
            (self.id_offset + 2 * self.id_mean_gap * self.docs < 2**62, "ids overflow int64"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"SkewSpec: {message}")

    @property
    def docs(self) -> int:
        return self.copies + self.clusters * self.cluster_size


@dataclass(frozen=True)
class _Edits:
    """One or two replaced words per document: positions and vocabulary ranks (pos2 = -1: one)."""

    pos1: np.ndarray
    pos2: np.ndarray
    word1: np.ndarray
    word2: np.ndarray


def _edits(rng: np.random.Generator, lengths: np.ndarray, vocab_size: int) -> _Edits:
    """Two distinct positions per document (the second unused for half of them)."""
    n = len(lengths)
    pos1 = (rng.random(n) * lengths).astype(np.int64)
    pos2 = (pos1 + 1 + (rng.random(n) * (lengths - 1)).astype(np.int64)) % lengths
    pos2[rng.random(n) < 0.5] = -1
    words = rng.integers(0, vocab_size, size=(2, n))
    return _Edits(pos1, pos2, words[0], words[1])


@dataclass(frozen=True)
class _Plan:
    ids: np.ndarray  # per skew document, by document index (notice copies first, then clusters)
    order: np.ndarray  # the documents' row order
    notice_edits: _Edits  # per notice copy (copy 0's are ignored: it is the notice itself)
    base_words: np.ndarray  # the planted clusters' bases, concatenated tokens
    base_punct: np.ndarray
    base_brk: np.ndarray
    base_starts: np.ndarray  # clusters + 1 offsets into the base tokens
    copy_edits: _Edits  # per planted document (index j * cluster_size + k; k = 0 is the base)
    dates: np.ndarray
    quality: np.ndarray


def _plan(spec: SkewSpec, vocab: synth._Vocabulary) -> _Plan:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, 0x5CE3])))
    n = spec.docs
    gaps = rng.integers(1, 2 * spec.id_mean_gap, size=n, dtype=np.int64)
    ids = rng.permutation(spec.id_offset + np.cumsum(gaps))
    order = rng.permutation(n)
    words = len(NOTICE.split())
    notice_edits = _edits(rng, np.full(spec.copies, words, np.int64), len(vocab.words))
    lo, hi = _CLUSTER_WORDS
    lengths = rng.integers(lo, hi + 1, size=spec.clusters)
    base_words, base_punct, base_brk = synth._sample_documents(rng, vocab, lengths)
    base_starts = np.zeros(spec.clusters + 1, np.int64)
    np.cumsum(lengths, out=base_starts[1:])
    planted = np.repeat(lengths, spec.cluster_size)
    copy_edits = _edits(rng, planted, len(vocab.words))
    dates = (16436 + rng.integers(0, 3653, size=n)).astype(np.int32)
    quality = np.round(rng.beta(2.0, 2.0, size=n), 3)
    return _Plan(
        ids, order, notice_edits, base_words, base_punct, base_brk, base_starts, copy_edits, dates, quality
    )


def _apply(words: np.ndarray, starts: np.ndarray, edits: _Edits, which: np.ndarray, keep: np.ndarray) -> None:
    """Replace the edited words of documents `which` (tokens from `starts`) in place, but
    where `keep` (a document left as it is)."""
    e = which[~keep]
    s = starts[~keep]
    words[s + edits.pos1[e]] = edits.word1[e]
    two = edits.pos2[e] >= 0
    words[s[two] + edits.pos2[e][two]] = edits.word2[e][two]


def _notice_texts(vocab: synth._Vocabulary, copies: np.ndarray, edits: _Edits) -> pa.Array:
    """Texts of notice copies `copies` (copy 0 is the notice itself), rendered with one
    `take` over a piece table: the notice's words, then the vocabulary, then a space."""
    tokens = NOTICE.split()
    w = len(tokens)
    pieces = pa.array([*tokens, *vocab.words, " ", ""], pa.string())
    space, empty = w + len(vocab.words), w + len(vocab.words) + 1
    words = np.tile(np.arange(w, dtype=np.int64), len(copies))
    starts = np.arange(len(copies), dtype=np.int64) * w
    _apply(words, starts, _shift(edits, w), copies, copies == 0)
    ids = np.full(2 * len(words), space, np.int64)
    ids[0::2] = words
    ids[2 * w - 1 :: 2 * w] = empty
    return _concatenated(pieces.take(pa.array(ids)), 2 * w, len(copies))


def _shift(edits: _Edits, by: int) -> _Edits:
    """Edits whose words index the piece table, where the vocabulary starts at `by`."""
    return _Edits(edits.pos1, edits.pos2, edits.word1 + by, edits.word2 + by)


def _concatenated(taken: pa.Array, pieces_per_doc: int, docs: int) -> pa.Array:
    """Documents of `pieces_per_doc` consecutive pieces each: the taken pieces' data is
    already the concatenated texts; only every document's first offset is kept."""
    _, offsets_buffer, data = taken.buffers()
    raw = np.frombuffer(offsets_buffer, dtype=np.int32)[taken.offset :][: len(taken) + 1]
    offsets = (raw[::pieces_per_doc] - raw[0]).astype(np.int32)[: docs + 1]
    body = data[int(raw[0]) : int(raw[-1])] if data is not None else pa.py_buffer(b"")
    return pa.StringArray.from_buffers(docs, pa.py_buffer(offsets.tobytes()), body)


def _cluster_texts(vocab: synth._Vocabulary, plan: _Plan, docs: np.ndarray, size: int) -> pa.Array:
    """Texts of planted documents `docs` (j * size + k: copy k of cluster j, k = 0 its base)."""
    cluster = docs // size
    a, b = plan.base_starts[cluster], plan.base_starts[cluster + 1]
    lengths = b - a
    starts = np.cumsum(lengths) - lengths
    gather = np.repeat(a - starts, lengths) + np.arange(int(lengths.sum()))
    words = plan.base_words[gather].astype(np.int64)
    punct, brk = plan.base_punct[gather], plan.base_brk[gather]
    _apply(words, starts, plan.copy_edits, docs, docs % size == 0)
    case, sep = synth._layout(punct, brk, lengths)
    return synth._render(vocab, words, punct, case, sep, lengths)


def iter_skew_batches(spec: SkewSpec) -> Iterator[pa.RecordBatch]:
    """The skew documents alone, in their row order, as batches of up to 8192 rows."""
    vocab = synth._vocabulary(CorpusSpec(num_docs=0).vocab_size, CorpusSpec(num_docs=0).zipf_exponent)
    plan = _plan(spec, vocab)
    for start in range(0, spec.docs, _ROWS):
        docs = plan.order[start : start + _ROWS]
        is_notice = docs < spec.copies
        notice = docs[is_notice]
        planted = docs[~is_notice] - spec.copies
        texts = pa.concat_arrays(
            [
                _notice_texts(vocab, notice, plan.notice_edits),
                _cluster_texts(vocab, plan, planted, spec.cluster_size),
            ]
        )
        # Back to row order: the notice copies were rendered first, then the planted ones.
        where = np.empty(len(docs), np.int64)
        where[np.flatnonzero(is_notice)] = np.arange(len(notice))
        where[np.flatnonzero(~is_notice)] = len(notice) + np.arange(len(planted))
        # The bound each copy's edits keep (its base: null).
        edits = np.empty(len(docs), np.int64)
        edits[is_notice] = 1 + (plan.notice_edits.pos2[notice] >= 0)
        edits[~is_notice] = 1 + (plan.copy_edits.pos2[planted] >= 0)
        grams = np.full(len(docs), len(NOTICE.split()) - 4, np.int64)
        grams[~is_notice] = np.diff(plan.base_starts)[planted // spec.cluster_size] - 4
        is_base = np.where(is_notice, docs == 0, (docs - spec.copies) % spec.cluster_size == 0)
        target = (grams - 5 * edits) / (grams + 5 * edits)
        cluster = np.where(
            is_notice, CLUSTER_OFFSET, CLUSTER_OFFSET + 1 + (docs - spec.copies) // spec.cluster_size
        )
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(plan.ids[docs], pa.int64()),
                texts.take(pa.array(where)),
                pa.array(plan.dates[docs], pa.date32()),
                pa.array(plan.quality[docs], pa.float64()),
                pa.array(cluster, pa.int64()),
                pa.array(target, pa.float64(), mask=is_base),
            ],
            schema=SCHEMA,
        )


def skewed_batches(base: CorpusSpec, skew: SkewSpec) -> Iterator[pa.RecordBatch]:
    """The base corpus with the skew documents spread evenly through it: after each of the
    base's batches, an equal share of the skew rows (all of them alone without a base)."""
    slots = max(1, math.ceil(base.num_docs / _ROWS))
    share = math.ceil(skew.docs / slots)
    pending: list[pa.RecordBatch] = []
    held = 0
    stream = iter_skew_batches(skew)

    def take(n: int) -> Iterator[pa.RecordBatch]:
        nonlocal held
        while held < n:
            more = next(stream, None)
            if more is None:
                break
            pending.append(more)
            held += len(more)
        rows = pa.Table.from_batches(pending, schema=SCHEMA) if pending else SCHEMA.empty_table()
        pending.clear()
        rest = rows.slice(n)
        pending.extend(rest.to_batches())
        held = rest.num_rows
        yield from rows.slice(0, n).to_batches(max_chunksize=_ROWS)

    for batch in synth.iter_batches(base):
        yield batch
        yield from take(share)
    yield from take(skew.docs)


def write_skewed_parquet(base: CorpusSpec, skew: SkewSpec, path: str | Path) -> None:
    """Parquet, streamed batch by batch (see `skewed_batches`)."""
    with pq.ParquetWriter(str(path), SCHEMA) as writer:
        for batch in skewed_batches(base, skew):
            if len(batch):
                writer.write_batch(batch)
