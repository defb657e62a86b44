"""Synthetic corpora with planted near-duplicates, for tests, benchmarks and the sample.

Pure numpy + pyarrow; no Spark. ``generate(CorpusSpec(...))`` returns an Arrow
table whose near-duplicate structure is known by construction:

- every document is made-up words (2-10 lowercase ASCII letters) drawn from a
  Zipfian vocabulary, with sentence punctuation, capitalized sentence starts and
  paragraph breaks, so it looks like text and has realistic shingle statistics
  (a few very frequent words, a long tail);
- a ``dup_fraction`` of the documents belongs to planted clusters of 2 to
  ``max_cluster_size`` documents: one *base* document plus variants of it. A
  variant is an exact copy, a *format copy* (same text up to case and
  whitespace, so it normalizes to the base: the exact-duplicate pass must catch
  it) or an *edited copy* whose word-5-gram Jaccard similarity with the base is
  a target drawn uniformly from ``jaccard_range`` (hit within about 0.01 for
  documents of a few hundred words, see ``_edit_variant``);
- row order is shuffled and ids are a shuffled sparse range above 2^31, so code
  that assumes ids are row numbers, sorted, dense or int32 fails on it.

Columns (``SCHEMA``): ``id`` int64, ``text`` string, ``date`` date32 (for the
"earliest" survivor policy), ``quality`` float64 in [0, 1] with three decimals
(for "quality"; values repeat, so ties occur), ``cluster`` int64 planted cluster
id or -1, ``target_jaccard`` float64 (null for unclustered documents and for
the base of each cluster, 1.0 for exact and format copies). ``cluster`` and
``target_jaccard`` are for humans and test oracles: the true pairs of a corpus
are those of the brute-force reference on its texts, since edited copies of a
base can be less similar to each other than to the base.

Generation is deterministic for a spec: the same table, row for row, on any
machine with the same numpy (numpy keeps its Generator streams stable within a
release but does not promise it across feature releases; the test of the
shipped sample notices). It is vectorized: the only Python loop is over
edited copies, about a fifth of the documents.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("quality", pa.float64(), nullable=False),
        pa.field("cluster", pa.int64(), nullable=False),
        pa.field("target_jaccard", pa.float64(), nullable=True),
    ]
)

# Rows per generated record batch. Part of the determinism contract: the random
# streams are split per batch, so changing it changes the corpus.
_BATCH_ROWS = 8192
_GUIDE_BUCKETS = 1 << 18  # Zipf sampling guide table (1 MiB)
_MIN_WORDS = 8  # every document has at least this many words, so always >= one word 5-gram
_NGRAM = 5  # what the planted Jaccard targets are measured on: word 5-grams

# Token punctuation classes. A token's identity after normalization is
# (word, punctuation): "kalo," and "kalo." are different words to a shingler.
_P_NONE, _P_COMMA, _P_PERIOD, _P_QUESTION = 0, 1, 2, 3
_PUNCT_CHARS = ("", ",", ".", "?")
_P_SENTENCE_END = 1.0 / 15.0  # mean sentence of 15 words
_P_COMMA_RATE = 1.0 / 12.0
_P_QUESTION_SHARE = 0.1  # of sentence ends
_P_PARAGRAPH = 0.2  # of sentence ends followed by a newline

# Separators after a token. 0-2 are what plain documents use; the rest only
# appear in format copies (all of them collapse to one space when normalized).
_SEPARATORS = (" ", "\n", "", "  ", " \n", "\t", "\n\n", "   ")
_S_SPACE, _S_NEWLINE, _S_END = 0, 1, 2
_FORMAT_SEPARATORS = np.array([1, 3, 4, 5, 6, 7], dtype=np.int8)
_CASE_LOWER, _CASE_CAPITAL, _CASE_UPPER = 0, 1, 2

# Variant kinds.
_KIND_EXACT, _KIND_FORMAT, _KIND_EDIT = 0, 1, 2

_DATE_START = 16436  # 2015-01-01 in days since the epoch
_DATE_SPAN = 3653  # ten years

# Fixed: the vocabulary is a property of the "language", shared by all seeds.
_VOCAB_SEED = 0x5EED_70CAB
_ONSETS = (
    "",
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "pl",
    "st",
    "tr",
    "ch",
    "sh",
    "th",
    "qu",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ea", "ou", "y")
_CODAS = ("", "", "", "", "", "n", "r", "s", "l", "m", "t", "k", "nd", "st", "p", "x")

# Random odd multipliers of the 5-gram hash. Linear in the token keys, so two
# different 5-grams collide with probability ~2^-60: far below the Jaccard
# tolerance, and the targets are re-checked exactly by the tests anyway.
_GRAM_MULTIPLIERS = tuple(
    np.uint64(m) | np.uint64(1)
    for m in np.random.Generator(np.random.PCG64(0xC0FFEE)).integers(
        0, np.iinfo(np.int64).max, size=_NGRAM, dtype=np.int64
    )
)


@dataclass(frozen=True)
class CorpusSpec:
    """What to generate. Every field is part of the determinism key."""

    num_docs: int
    seed: int = 0
    mean_chars: int = 2000  # mean document length before clipping (lognormal)
    length_sigma: float = 0.6  # sigma of log(length)
    min_chars: int = 200
    max_chars: int = 20_000
    vocab_size: int = 50_000
    zipf_exponent: float = 1.1
    dup_fraction: float = 0.3  # fraction of documents in planted clusters (bases included)
    jaccard_range: tuple[float, float] = (0.3, 1.0)  # targets of edited copies
    max_cluster_size: int = 5
    exact_copy_fraction: float = 0.1  # of variants: byte-identical copies of the base
    format_copy_fraction: float = 0.1  # of variants: case/whitespace changes only
    id_offset: int = 3_000_000_000  # ids start above 2^31: int32 truncation shows up
    id_mean_gap: int = 16  # ids are sparse: consecutive ids differ by 1..2*gap-1

    def __post_init__(self) -> None:
        lo, hi = self.jaccard_range
        checks = [
            (self.num_docs >= 0, "num_docs must be >= 0"),
            (self.seed >= 0, "seed must be >= 0"),
            (self.length_sigma >= 0, "length_sigma must be >= 0"),
            (
                1 <= self.min_chars <= self.mean_chars <= self.max_chars,
                "need 1 <= min_chars <= mean_chars <= max_chars",
            ),
            (100 <= self.vocab_size <= 5_000_000, "vocab_size must be in [100, 5000000]"),
            (self.zipf_exponent > 0, "zipf_exponent must be > 0"),
            (0.0 <= self.dup_fraction <= 1.0, "dup_fraction must be in [0, 1]"),
            (0.0 < lo <= hi <= 1.0, "jaccard_range must satisfy 0 < low <= high <= 1"),
            (self.max_cluster_size >= 2, "max_cluster_size must be >= 2"),
            (
                self.exact_copy_fraction >= 0
                and self.format_copy_fraction >= 0
                and self.exact_copy_fraction + self.format_copy_fraction <= 1.0,
                "exact_copy_fraction + format_copy_fraction must be in [0, 1]",
            ),
            (self.id_offset >= 0 and self.id_mean_gap >= 1, "bad id_offset or id_mean_gap"),
            (self.id_offset + 2 * self.id_mean_gap * self.num_docs < 2**62, "ids overflow int64"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"CorpusSpec: {message}")


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class _Vocabulary:
    words: tuple[str, ...]  # by frequency rank: words[0] is the most frequent
    cdf: np.ndarray  # float64 cumulative Zipf probabilities by rank
    guide: np.ndarray  # int32: guide[i] = searchsorted(cdf, i / _GUIDE_BUCKETS, "right")
    pieces: pa.StringArray  # every renderable piece: words in 3 cases, then suffixes
    mean_token_chars: float  # expected rendered characters per token, separator included


@lru_cache(maxsize=8)
def _vocabulary(size: int, exponent: float) -> _Vocabulary:
    rng = np.random.Generator(np.random.PCG64(_VOCAB_SEED))
    seen: dict[str, None] = {}  # insertion-ordered set: deterministic order
    while len(seen) < size:
        batch = 2 * (size - len(seen)) + 64
        syllables = rng.choice(4, size=batch, p=[0.25, 0.45, 0.22, 0.08]) + 1
        parts = rng.integers(0, [len(_ONSETS), len(_VOWELS), len(_CODAS)], size=(batch, 4, 3))
        for count, word_parts in zip(syllables.tolist(), parts.tolist(), strict=True):
            word = "".join(_ONSETS[o] + _VOWELS[v] + _CODAS[c] for o, v, c in word_parts[:count])
            if 2 <= len(word) <= 10 and word not in seen:
                seen[word] = None
                if len(seen) == size:
                    break
    # Frequent words are short in real languages: sorting by length (stable)
    # puts two-letter words at the head of the Zipf ranks, ten-letter ones in the tail.
    words = tuple(sorted(seen, key=len))
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    probabilities = weights / weights.sum()
    cdf = np.cumsum(probabilities)
    cdf[-1] = 1.0
    grid = np.arange(_GUIDE_BUCKETS + 1, dtype=np.float64) / _GUIDE_BUCKETS
    guide = np.searchsorted(cdf, grid, side="right").astype(np.int32)

    # Piece table: words in three cases, then every (punctuation, separator) suffix.
    texts: list[str] = list(words)
    texts += [w.capitalize() for w in words]
    texts += [w.upper() for w in words]
    texts += [p + s for p in _PUNCT_CHARS for s in _SEPARATORS]
    pieces = pa.array(texts, pa.string())
    lengths = np.asarray(pc.utf8_length(pieces), dtype=np.int64)

    word_lengths = lengths[:size].astype(np.float64)
    punct_rate = _P_SENTENCE_END + (1 - _P_SENTENCE_END) * _P_COMMA_RATE
    mean_token_chars = float(probabilities @ word_lengths) + 1.0 + punct_rate
    return _Vocabulary(words, cdf, guide, pieces, mean_token_chars)


def _sample_words(rng: np.random.Generator, vocab: _Vocabulary, count: int) -> np.ndarray:
    """Zipf-distributed word ranks: inverse CDF, with a guide table in front.

    Same result as searchsorted(cdf, u) for every u, but most draws fall in a
    guide bucket that holds a single rank and skip the binary search over the
    whole vocabulary (which costs a cache miss per level).
    """
    u = rng.random(count)
    bucket = (u * _GUIDE_BUCKETS).astype(np.int64)
    ranks = vocab.guide[bucket]
    unsure = np.flatnonzero(ranks != vocab.guide[bucket + 1])
    ranks[unsure] = np.searchsorted(vocab.cdf, u[unsure], side="right")
    return ranks


def _sample_punctuation(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Punctuation class and paragraph-break flag of `count` running tokens."""
    u = rng.random(count)
    punct = np.zeros(count, dtype=np.int8)
    comma_hi = _P_SENTENCE_END + (1 - _P_SENTENCE_END) * _P_COMMA_RATE
    question_hi = _P_SENTENCE_END * _P_QUESTION_SHARE
    punct[u < comma_hi] = _P_COMMA
    punct[u < _P_SENTENCE_END] = _P_PERIOD
    punct[u < question_hi] = _P_QUESTION
    brk = (punct >= _P_PERIOD) & (rng.random(count) < _P_PARAGRAPH)
    return punct, brk


def _sample_documents(
    rng: np.random.Generator, vocab: _Vocabulary, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens of len(lengths) fresh documents, concatenated: (words, punct, brk)."""
    total = int(lengths.sum())
    words = _sample_words(rng, vocab, total)
    punct, brk = _sample_punctuation(rng, total)
    # Documents end a sentence.
    last = np.cumsum(lengths) - 1
    punct[last[punct[last] < _P_PERIOD]] = _P_PERIOD
    return words, punct, brk


# --------------------------------------------------------------------------- rendering


def _render(
    vocab: _Vocabulary,
    words: np.ndarray,
    punct: np.ndarray,
    case: np.ndarray,
    sep: np.ndarray,
    doc_tokens: np.ndarray,
) -> pa.StringArray:
    """Texts of documents given as concatenated token arrays.

    Each token is two pieces, the word in its case and its punctuation plus
    separator. Arrow's `take` over the piece table lays the chosen pieces out
    back to back in one data buffer, which is exactly the concatenated texts:
    only the document boundaries are left to pick from its offsets.
    """
    vocab_size = len(vocab.words)
    piece_ids = np.empty(2 * len(words), dtype=np.int64)
    piece_ids[0::2] = case.astype(np.int64) * vocab_size + words
    piece_ids[1::2] = 3 * vocab_size + punct.astype(np.int64) * len(_SEPARATORS) + sep
    taken = vocab.pieces.take(pa.array(piece_ids))
    _, offsets_buffer, data = taken.buffers()
    raw = np.frombuffer(offsets_buffer, dtype=np.int32)[taken.offset :][: len(piece_ids) + 1]
    offsets = np.empty(len(doc_tokens) + 1, dtype=np.int32)
    offsets[0] = 0
    offsets[1:] = raw[np.cumsum(doc_tokens) * 2] - raw[0]
    body = data[int(raw[0]) : int(raw[-1])] if data is not None else pa.py_buffer(b"")
    return pa.StringArray.from_buffers(len(doc_tokens), pa.py_buffer(offsets.tobytes()), body)


def _layout(punct: np.ndarray, brk: np.ndarray, doc_tokens: np.ndarray) -> tuple[np.ndarray, ...]:
    """Plain case and separators: capitalized sentence starts, newline paragraphs."""
    starts = np.cumsum(doc_tokens) - doc_tokens
    case = np.zeros(len(punct), dtype=np.int8)
    case[1:] = punct[:-1] >= _P_PERIOD
    case[starts] = _CASE_CAPITAL
    sep = np.where(brk, _S_NEWLINE, _S_SPACE).astype(np.int8)
    sep[starts + doc_tokens - 1] = _S_END
    return case, sep


# --------------------------------------------------------------------------- edits


def _gram_hashes(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct 64-bit hashes of the word 5-grams of a token-key sequence."""
    n = len(keys) - _NGRAM + 1
    if n <= 0:
        return np.zeros(0, dtype=np.uint64)
    k = keys.astype(np.uint64)
    h = k[:n] * _GRAM_MULTIPLIERS[0]
    for j in range(1, _NGRAM):
        h += k[j : j + n] * _GRAM_MULTIPLIERS[j]
    # Sort + adjacent compare: several times faster than np.unique on small arrays.
    h.sort()
    keep = np.empty(n, dtype=bool)
    keep[0] = True
    np.not_equal(h[1:], h[:-1], out=keep[1:])
    return h[keep]


def _overlap(base: np.ndarray, other: np.ndarray) -> tuple[int, int]:
    """(|A ∩ B|, |A ∪ B|) of two sorted distinct hash arrays."""
    if len(base) == 0 or len(other) == 0:
        return 0, len(base) + len(other)
    pos = np.minimum(np.searchsorted(base, other), len(base) - 1)
    shared = int(np.count_nonzero(base[pos] == other))
    return shared, len(base) + len(other) - shared


def _keys(words: np.ndarray, punct: np.ndarray) -> np.ndarray:
    return words.astype(np.int64) * 4 + punct


def _edit_rate(jaccard: float) -> float:
    """Fraction of positions to edit for a given Jaccard, in a simple model.

    If each position is edited independently with probability f, a 5-gram
    survives with probability q = (1 - f)^5, both sides keep ~N shingles and
    J = q / (2 - q); so q = 2J / (1 + J) and f = 1 - q^(1/5).
    """
    q = 2.0 * jaccard / (1.0 + jaccard)
    return 1.0 - q**0.2


def _edit_variant(
    rng: np.random.Generator,
    vocab: _Vocabulary,
    words: np.ndarray,
    punct: np.ndarray,
    brk: np.ndarray,
    base_hashes: np.ndarray,
    target: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A copy of the base whose word-5-gram Jaccard with it is close to `target`.

    Coarse step: edit the first m positions of a random order (replace 50 %,
    insert-before 25 %, delete 25 %). The edited set grows with m, so J(m)
    falls (almost) monotonically; a bracketed secant search, steered by
    `_edit_rate` calibrated on each measurement, finds an m with J(m) just
    above the target in two or three evaluations (bisection if it stalls).
    One edit moves J by up to ~10/|shingles|, too coarse for short documents,
    so the fine step appends (or prepends) k new words: each adds exactly one
    new shingle and removes none, so J = shared / (union + k) lands within one
    shingle's worth, 1/union, of the target.
    """
    n = len(words)
    keys = _keys(words, punct)
    order = rng.permutation(n)
    u = rng.random(n)
    replace = u < 0.5
    insert = u >= 0.75
    delete = ~replace & ~insert
    fresh = _sample_words(rng, vocab, n)
    fresh_keys = fresh.astype(np.int64) * 4  # inserted words carry no punctuation

    def layout(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        edited = np.zeros(n, dtype=bool)
        edited[order[:m]] = True
        counts = np.ones(n, dtype=np.int64)
        counts[edited & delete] = 0
        counts[edited & insert] = 2
        src = np.repeat(np.arange(n), counts)
        first = np.cumsum(counts) - counts  # output slot of each base position's first copy
        rep = np.flatnonzero(edited & replace)
        ins = np.flatnonzero(edited & insert)
        return src, first, rep, ins

    def overlap(m: int) -> tuple[int, int]:
        src, first, rep, ins = layout(m)
        k = keys[src]
        k[first[rep]] = fresh_keys[rep] + (keys[rep] & 3)  # a replaced word keeps its punctuation
        k[first[ins]] = fresh_keys[ins]
        return _overlap(base_hashes, _gram_hashes(k))

    # Invariant: J(lo) >= target (J(0) = 1) and, unless hi == n + 1, J(hi) < target.
    lo, hi = 0, n + 1
    shared, union = len(base_hashes), len(base_hashes)
    # Aim a little above the target: the fine step can only lower J.
    aim = _edit_rate(min(1.0, target + 0.01))
    m = max(1, round(aim * n))
    for _ in range(40):
        if hi - lo <= 1 or shared < (target + 0.02) * union:
            break
        if not lo < m < hi:
            m = (lo + hi) // 2
        s, un = overlap(m)
        if s >= target * un:
            lo, shared, union = m, s, un
        else:
            hi = m
        rate = _edit_rate(s / un) if s else 1.0
        m = round(m * aim / rate) if rate > 0 else 2 * m

    src, first, rep, ins = layout(lo)
    w, p, b = words[src], punct[src], brk[src]
    w[first[rep]] = fresh[rep]
    w[first[ins]] = fresh[ins]
    p[first[ins]] = _P_NONE
    b[first[ins]] = False

    extra = round(shared / target - union) if shared else 0
    if lo == 0:
        extra = max(extra, 1)  # an edited copy is never byte-identical to its base
    if extra > 0:
        # New words: each extra word adds one 5-gram that the base does not have.
        ew = _sample_words(rng, vocab, extra)
        ep, eb = _sample_punctuation(rng, extra)
        ep[-1] = max(int(ep[-1]), _P_PERIOD)  # a sentence of its own
        if rng.random() < 0.5:  # appended tail
            w, p, b = np.concatenate([w, ew]), np.concatenate([p, ep]), np.concatenate([b, eb])
        else:  # prepended head
            w, p, b = np.concatenate([ew, w]), np.concatenate([ep, p]), np.concatenate([eb, b])
    return w, p, b


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class _Plan:
    """Everything decided before any text: roles, row positions, metadata.

    Logical documents 0..C-1 are the bases of clusters 0..C-1, C..C+V-1 the
    variants, the rest unclustered; `row_doc[r]` is the logical document
    stored at row r.
    """

    num_clusters: int
    variant_cluster: np.ndarray  # int64, per variant
    variant_kind: np.ndarray  # int8, per variant
    variant_target: np.ndarray  # float64, per variant
    doc_words: np.ndarray  # int64 words per logical document (variants: unused)
    row_doc: np.ndarray  # int64, per row
    ids: np.ndarray  # int64, per row
    dates: np.ndarray  # int32 days since epoch, per logical document
    quality: np.ndarray  # float64, per logical document


def _plan(spec: CorpusSpec, vocab: _Vocabulary) -> _Plan:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, 1])))
    n = spec.num_docs
    members = round(spec.dup_fraction * n)
    draws = rng.integers(2, spec.max_cluster_size + 1, size=members // 2 + 1)
    ends = np.cumsum(draws)
    whole = int(np.searchsorted(ends, members, side="right"))
    sizes = draws[:whole]
    rest = members - (int(ends[whole - 1]) if whole else 0)
    if rest >= 2:
        sizes = np.append(sizes, rest)
    clusters = len(sizes)
    variant_cluster = np.repeat(np.arange(clusters, dtype=np.int64), sizes - 1)
    variants = len(variant_cluster)

    u = rng.random(variants)
    kind = np.full(variants, _KIND_EDIT, dtype=np.int8)
    kind[u < spec.exact_copy_fraction + spec.format_copy_fraction] = _KIND_FORMAT
    kind[u < spec.exact_copy_fraction] = _KIND_EXACT
    lo, hi = spec.jaccard_range
    target = rng.uniform(lo, hi, size=variants)
    target[kind != _KIND_EDIT] = 1.0

    sigma = spec.length_sigma
    chars = spec.mean_chars * np.exp(sigma * rng.standard_normal(n) - sigma * sigma / 2)
    chars = np.clip(chars, spec.min_chars, spec.max_chars)
    doc_words = np.maximum(np.rint(chars / vocab.mean_token_chars), _MIN_WORDS).astype(np.int64)

    row_doc = rng.permutation(n).astype(np.int64)
    gaps = rng.integers(1, 2 * spec.id_mean_gap, size=n, dtype=np.int64)
    ids = rng.permutation(spec.id_offset + np.cumsum(gaps))

    dates = (_DATE_START + rng.integers(0, _DATE_SPAN, size=n)).astype(np.int32)
    quality = np.round(rng.beta(2.0, 2.0, size=n), 3)
    # Crawled exact copies are often fetched the same day: plant ties for "earliest".
    copy_doc = clusters + np.flatnonzero(kind != _KIND_EDIT)
    same_day = copy_doc[rng.random(len(copy_doc)) < 0.5]
    dates[same_day] = dates[variant_cluster[same_day - clusters]]
    return _Plan(clusters, variant_cluster, kind, target, doc_words, row_doc, ids, dates, quality)


# --------------------------------------------------------------------------- generation


def iter_batches(spec: CorpusSpec) -> Iterator[pa.RecordBatch]:
    """The corpus as record batches of up to 8192 rows, in row order (see `generate`)."""
    vocab = _vocabulary(spec.vocab_size, spec.zipf_exponent)
    plan = _plan(spec, vocab)
    clusters = plan.num_clusters
    variants = len(plan.variant_cluster)

    # Bases first, from their own stream: variants anywhere in the table need them.
    base_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, 2])))
    base_lengths = plan.doc_words[:clusters]
    base_starts = np.zeros(clusters + 1, dtype=np.int64)
    np.cumsum(base_lengths, out=base_starts[1:])
    parts = [
        _sample_documents(base_rng, vocab, base_lengths[i : i + _BATCH_ROWS])
        for i in range(0, clusters, _BATCH_ROWS)
    ]
    base_words, base_punct, base_brk = (
        (np.concatenate([p[j] for p in parts]) if parts else np.zeros(0, dt))
        for j, dt in ((0, np.int32), (1, np.int8), (2, bool))
    )

    def base_tokens(c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = base_starts[c], base_starts[c + 1]
        return base_words[a:b], base_punct[a:b], base_brk[a:b]

    for batch_index, row_start in enumerate(range(0, spec.num_docs, _BATCH_ROWS)):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, 3, batch_index])))
        docs = plan.row_doc[row_start : row_start + _BATCH_ROWS]
        is_fresh = docs >= clusters + variants
        fresh_lengths = plan.doc_words[docs[is_fresh]]
        fw, fp, fb = _sample_documents(rng, vocab, fresh_lengths)
        fresh_ends = np.cumsum(fresh_lengths)

        segments: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        fmt_rows: list[int] = []
        hash_cache: dict[int, np.ndarray] = {}
        fresh_i = 0
        for row, doc in enumerate(docs.tolist()):
            if doc >= clusters + variants:
                end = int(fresh_ends[fresh_i])
                begin = end - int(fresh_lengths[fresh_i])
                segments.append((fw[begin:end], fp[begin:end], fb[begin:end]))
                fresh_i += 1
            elif doc < clusters:
                segments.append(base_tokens(doc))
            else:
                v = doc - clusters
                c = int(plan.variant_cluster[v])
                kind = int(plan.variant_kind[v])
                tokens = base_tokens(c)
                if kind == _KIND_EDIT:
                    if c not in hash_cache:
                        hash_cache[c] = _gram_hashes(_keys(tokens[0], tokens[1]))
                    goal = float(plan.variant_target[v])
                    segments.append(_edit_variant(rng, vocab, *tokens, hash_cache[c], goal))
                else:
                    segments.append(tokens)
                    if kind == _KIND_FORMAT:
                        fmt_rows.append(row)

        doc_tokens = np.fromiter((len(s[0]) for s in segments), np.int64, len(segments))
        words = np.concatenate([s[0] for s in segments])
        punct = np.concatenate([s[1] for s in segments])
        brk = np.concatenate([s[2] for s in segments])
        case, sep = _layout(punct, brk, doc_tokens)
        if fmt_rows:
            _reformat(rng, np.asarray(fmt_rows), doc_tokens, case, sep)
        text = _render(vocab, words, punct, case, sep, doc_tokens)

        variant_index = docs - clusters
        in_variants = (variant_index >= 0) & (variant_index < variants)
        vi = variant_index[in_variants]
        cluster = np.full(len(docs), -1, dtype=np.int64)
        cluster[docs < clusters] = docs[docs < clusters]
        cluster[in_variants] = plan.variant_cluster[vi]
        target = np.full(len(docs), np.nan)
        target[in_variants] = plan.variant_target[vi]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(plan.ids[row_start : row_start + len(docs)], pa.int64()),
                text,
                pa.array(plan.dates[docs], pa.date32()),
                pa.array(plan.quality[docs], pa.float64()),
                pa.array(cluster, pa.int64()),
                pa.array(target, pa.float64(), mask=~in_variants),
            ],
            schema=SCHEMA,
        )


def _reformat(
    rng: np.random.Generator,
    rows: np.ndarray,
    doc_tokens: np.ndarray,
    case: np.ndarray,
    sep: np.ndarray,
) -> None:
    """Turn rows into format copies in place: random case and whitespace, same normal form."""
    starts = np.cumsum(doc_tokens) - doc_tokens
    lengths = doc_tokens[rows]
    tokens = np.repeat(starts[rows], lengths) + (
        np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    u = rng.random(len(tokens))
    recase = tokens[u < 0.12]
    case[recase] = rng.choice([_CASE_CAPITAL, _CASE_UPPER], size=len(recase))
    respace = tokens[(u > 0.85) & (sep[tokens] != _S_END)]
    sep[respace] = rng.choice(_FORMAT_SEPARATORS, size=len(respace))
    trailing = starts[rows] + lengths - 1
    sep[trailing] = rng.choice([_S_END, _S_SPACE, _S_NEWLINE], size=len(rows))
    # Every format copy differs from its base: its first word is in capitals.
    case[starts[rows]] = _CASE_UPPER


def generate(spec: CorpusSpec) -> pa.Table:
    """The whole corpus as one table (see the module docstring for its columns).

    Deterministic: the same spec gives an equal table, row for row. Rows are in
    a random order unrelated to ids and to clusters. The table has one chunk
    per 8192 rows, which keeps every chunk's string offsets far from 2^31.
    """
    return pa.Table.from_batches(list(iter_batches(spec)), schema=SCHEMA)


# --------------------------------------------------------------------------- files


def _batches(data: pa.Table | Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    if isinstance(data, pa.Table):
        yield from data.to_batches()
    else:
        yield from data


def write_jsonl_gz(data: pa.Table | Iterable[pa.RecordBatch], path: str | Path) -> None:
    """JSON Lines, gzip: one object per row, dates as "YYYY-MM-DD", nulls as null.

    Byte-deterministic: no file name and mtime 0 in the gzip header, keys in
    column order, shortest float repr.
    """
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as out,
    ):
        for batch in _batches(data):
            names = batch.schema.names
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            lines = []
            for row in zip(*columns, strict=True):
                obj = {
                    k: (v.isoformat() if hasattr(v, "isoformat") else v)
                    for k, v in zip(names, row, strict=True)
                }
                lines.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))


def read_jsonl_gz(path: str | Path, schema: pa.Schema = SCHEMA) -> pa.Table:
    """Read a file written by `write_jsonl_gz` back into `schema` (dates parsed)."""
    import datetime as dt

    rows: dict[str, list[object]] = {name: [] for name in schema.names}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            for name in schema.names:
                rows[name].append(obj.get(name))
    arrays = []
    for field in schema:
        values = rows[field.name]
        if pa.types.is_date(field.type):
            values = [None if v is None else dt.date.fromisoformat(str(v)) for v in values]
        arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_parquet(data: pa.Table | Iterable[pa.RecordBatch], path: str | Path) -> None:
    """Parquet, streamed batch by batch (a 1M-document corpus need not fit twice in memory)."""
    with pq.ParquetWriter(str(path), SCHEMA) as writer:
        for batch in _batches(data):
            writer.write_batch(batch)


# --------------------------------------------------------------------------- heavy tails


def heavy_tailed_specs(body_docs: int, seed: int = 0) -> list[CorpusSpec]:
    """Specs of a corpus with the document lengths of real text, for memory tests.

    Three parts with disjoint id ranges (the ids of all parts stay unique):
    `body_docs` documents with a median of 10 KB (lognormal, sigma 1, up to 900 KB),
    1 % as many of 1 to 5 MB, and one of 50 MB. Each part has planted clusters
    (the 50 MB document is alone). With 22,000 body documents the whole is about 1 GB.
    """
    return [
        CorpusSpec(
            num_docs=body_docs,
            seed=seed,
            mean_chars=16_500,  # median = mean / e^(sigma^2 / 2) ~ 10 KB
            length_sigma=1.0,
            min_chars=200,
            max_chars=900_000,
            id_offset=10_000_000_000,
        ),
        CorpusSpec(
            num_docs=max(1, body_docs // 99),
            seed=seed + 1,
            mean_chars=2_700_000,
            length_sigma=0.45,
            min_chars=1_000_000,
            max_chars=5_000_000,
            max_cluster_size=3,
            id_offset=20_000_000_000,
        ),
        CorpusSpec(
            num_docs=1,
            seed=seed + 2,
            mean_chars=50_000_000,
            length_sigma=0.0,
            min_chars=50_000_000,
            max_chars=50_000_000,
            dup_fraction=0.0,
            id_offset=30_000_000_000,
        ),
    ]


def write_parquet_bounded(
    specs: Iterable[CorpusSpec], path: str | Path, row_group_bytes: int = 64 << 20
) -> tuple[int, int]:
    """Write the corpora of `specs` to one Parquet file the way writers bounded in bytes
    (Spark's among them) lay it out: row groups of at most about `row_group_bytes` of text,
    and no dictionary for the text column. Returns (documents, bytes of text)."""
    docs = total = 0
    others = [f.name for f in SCHEMA if f.name != "text"]
    with pq.ParquetWriter(str(path), SCHEMA, use_dictionary=others) as writer:
        for spec in specs:
            for batch in iter_batches(spec):
                lengths = np.asarray(pc.binary_length(batch.column("text")), dtype=np.int64)
                # Cut the batch where its running text size crosses each multiple of the bound.
                group = np.cumsum(lengths) // row_group_bytes
                cuts = np.flatnonzero(np.diff(group)) + 1
                for start, end in zip(np.r_[0, cuts], np.r_[cuts, len(batch)], strict=True):
                    if end > start:
                        writer.write_batch(batch.slice(int(start), int(end - start)))
                docs += len(batch)
                total += int(lengths.sum())
    return docs, total
