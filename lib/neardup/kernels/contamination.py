"""Decontamination of a batch of documents against a reference (evaluation sets): word
n-gram overlap, and near-duplicates by MinHash band keys then verification.

Definitions (docs/design.md, "Decontamination"):

- words are those of the text normalized as dedup normalizes it (kernels/textnorm.py),
  split at the single spaces normalization leaves; a text of fewer than n words has no
  n-gram, so it can only match as a near-duplicate;
- an n-gram's hash is dedup's word-shingle hash of its n words (kernels/hashing.py, under
  `minhash.seed`). A document's n-gram whose hash is in the reference's sorted hash array
  is a hit; a hit is a match only once its bytes equal those of the reference's n-gram, so
  a hash collision never removes a document;
- for each (document, reference item) sharing an n-gram, the FIRST such n-gram in the
  document's order is reported, as normalized text;
- near-duplicates: a reference item sharing a band key with the document (dedup's
  signatures and band keys, kernels/minhash.py) is a candidate, matched when its
  similarity (exact Jaccard of the two shingle sets, or the signature estimate) is at
  least the threshold.

The reference is small and goes to every Python worker whole (`Reference`, serialized as
one Arrow IPC record batch, read back without copying); the corpus streams through
`decontaminate_batch` one Arrow batch at a time. A document's n-grams are looked up in the
reference's sorted hashes behind a bitmap filter (`_lookup`), in one numba loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.arrow import text_buffers
from neardup.kernels.choices import DECON_VERIFY
from neardup.kernels.hashing import MASK64, _count_words, doc_shingles, shingle_hashes, shingle_keys
from neardup.kernels.jit import njit
from neardup.kernels.minhash import band_keys, estimate_jaccard
from neardup.kernels.signatures import REASON_EMPTY, REASON_NULL, SignParams, normalized, text_signatures
from neardup.kernels.similarity import jaccard_between

I32Array = npt.NDArray[np.int32]
I64Array = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
U32Array = npt.NDArray[np.uint32]
U8Array = npt.NDArray[np.uint8]

REASON_NEAR = "near_duplicate"
REASON_NGRAM = "ngram"
REASONS = (REASON_NEAR, REASON_NGRAM)
VERIFY_METHODS = DECON_VERIFY  # the config checks them too (kernels/choices.py)

REF = "_ref"  # a reference item's row in the reference (its items sorted by id)
NGRAM = "ngram"
_SPACE = np.uint8(0x20)


@dataclass(frozen=True)
class DeconParams:
    """What decides a match: dedup's signing parameters, n of the n-gram test (0: off),
    the near-duplicate threshold (None: off) and how candidates are verified."""

    sign: SignParams
    ngram: int
    threshold: float | None
    verify: str

    def __post_init__(self) -> None:
        if self.verify not in VERIFY_METHODS:
            raise ValueError(f"verify must be one of {VERIFY_METHODS}, got {self.verify!r}")
        if self.ngram < 0:
            raise ValueError(f"ngram must be >= 0, got {self.ngram}")


# --------------------------------------------------------------------------------------------
# Word n-grams


@njit(cache=True, nogil=True)
def _ngram_hashes_kernel(
    starts: I64Array, ends: I64Array, data: U8Array, n: int, keys: U64Array
) -> tuple[I64Array, U64Array]:
    ndocs = starts.shape[0]
    offsets = np.empty(ndocs + 1, dtype=np.int64)
    offsets[0] = 0
    for d in range(ndocs):
        w = _count_words(data, starts[d], ends[d])
        offsets[d + 1] = offsets[d] + (w - n + 1 if w >= n else 0)
    out = np.empty(offsets[ndocs], dtype=np.uint64)
    ring = np.empty(2 * n, dtype=np.uint64)
    for d in range(ndocs):
        if offsets[d + 1] > offsets[d]:
            # At least n words: doc_shingles emits word n-grams only (no character fallback).
            doc_shingles(data, starts[d], ends[d], True, n, n, keys, ring, out, offsets[d])
    return offsets, out


def ngram_hashes(norm: pa.Array, n: int, seed: int) -> tuple[I64Array, U64Array]:
    """(offsets int64 of length rows + 1, hashes uint64): ``hashes[offsets[i]:offsets[i+1]]``
    are the hashes of row i's word n-grams in text order, repeats kept (dedup's word-shingle
    hash, `hashing.doc_shingles`). A row of fewer than n words has none. Texts must be
    normalized."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    starts, ends, data = text_buffers(norm)
    return _ngram_hashes_kernel(starts, ends, data, int(n), shingle_keys(int(seed) & MASK64))


@njit(cache=True, nogil=True)
def _ngram_spans(
    starts: I64Array, ends: I64Array, data: U8Array, doc: I64Array, pos: I64Array, n: int
) -> tuple[I64Array, I64Array]:
    """Byte span in `data` of n-gram pos[h] of row doc[h], for hits sorted by (doc, pos):
    one walk over the words of each row that has hits."""
    m = doc.shape[0]
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    ring = np.empty(n, dtype=np.int64)  # start of each of the last n words walked
    current = -1
    i = 0
    end = 0
    k = -1  # index of the last word walked in the current row
    last_end = 0
    for h in range(m):
        if doc[h] != current:
            current = doc[h]
            i = starts[current]
            end = ends[current]
            k = -1
        target = pos[h] + n - 1
        while k < target:
            while i < end and data[i] == _SPACE:
                i += 1
            ring[(k + 1) % n] = i
            while i < end and data[i] != _SPACE:
                i += 1
            k += 1
            last_end = i
        lo[h] = ring[pos[h] % n]
        hi[h] = last_end
    return lo, hi


@njit(cache=True, nogil=True)
def _gather(data: U8Array, lo: I64Array, hi: I64Array) -> tuple[I64Array, U8Array]:
    offsets = np.empty(lo.shape[0] + 1, dtype=np.int64)
    offsets[0] = 0
    for c in range(lo.shape[0]):
        offsets[c + 1] = offsets[c] + hi[c] - lo[c]
    out = np.empty(offsets[-1], dtype=np.uint8)
    for c in range(lo.shape[0]):
        out[offsets[c] : offsets[c + 1]] = data[lo[c] : hi[c]]
    return offsets, out


def _texts(data: U8Array, lo: I64Array, hi: I64Array) -> pa.Array:
    """The UTF-8 byte ranges [lo, hi) of `data` as a large_string array."""
    offsets, out = _gather(data, lo, hi)
    return pa.LargeStringArray.from_buffers(len(lo), pa.py_buffer(offsets), pa.py_buffer(out))


def _expand(lo: I64Array, hi: I64Array) -> tuple[I64Array, I64Array]:
    """Every (i, j) with lo[i] <= j < hi[i], in order of i then j."""
    counts = hi - lo
    which = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    return which, lo[which] + (np.arange(int(counts.sum()), dtype=np.int64) - first[which])


def _run_starts(*keys: np.ndarray) -> npt.NDArray[np.bool_]:
    """True where a row starts a run of equal key tuples (rows already sorted by them)."""
    n = len(keys[0])
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    return new


def _all_ngrams(offsets: I64Array) -> tuple[I64Array, I64Array]:
    """(row, position) of every n-gram, in order."""
    counts = np.diff(offsets)
    row = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return row, np.arange(int(offsets[-1]), dtype=np.int64) - offsets[:-1][row]


# --------------------------------------------------------------------------------------------
# Looking n-grams up in the reference

# Bits of the membership filter per n-gram entry: 1 - exp(-1/16), about 6 % of the corpus's
# n-grams that the reference does not hold, go on to the binary search.
FILTER_BITS = 16
_U1 = np.uint64(1)
_U63 = np.uint64(63)
_U6 = np.uint64(6)


@njit(cache=True, nogil=True)
def _filter_words(hashes: U64Array, shift: np.uint64, words: int) -> U64Array:
    bits = np.zeros(words, dtype=np.uint64)
    for h in hashes:
        b = h >> shift
        bits[b >> _U6] |= _U1 << (b & _U63)
    return bits


@njit(cache=True, nogil=True)
def _lookup(table: U64Array, bits: U64Array, shift: np.uint64, queries: U64Array) -> I64Array:
    """For each query, the first index of it in the sorted `table`, or -1. A query whose
    filter bit is clear is not in the table: one access to a bitmap of 2 bytes per entry
    instead of a binary search over 8-byte entries that miss the cache at every step."""
    n = table.shape[0]
    out = np.full(queries.shape[0], -1, dtype=np.int64)
    for q in range(queries.shape[0]):
        x = queries[q]
        b = x >> shift
        if (bits[b >> _U6] >> (b & _U63)) & _U1 == 0:
            continue
        lo = 0
        hi = n
        while lo < hi:
            mid = (lo + hi) >> 1
            if table[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        if lo < n and table[lo] == x:
            out[q] = lo
    return out


@njit(cache=True, nogil=True)
def _confirm(
    data: U8Array, lo: I64Array, hi: I64Array, text: U8Array, start: I64Array, item_end: I64Array
) -> npt.NDArray[np.bool_]:
    """data[lo:hi] (a document's n-gram) is the n-gram at text[start:] (a reference
    item's, which ends at item_end): the same bytes, then the end of a word there too."""
    out = np.zeros(lo.shape[0], dtype=np.bool_)
    for c in range(lo.shape[0]):
        length = hi[c] - lo[c]
        s = start[c]
        if s + length > item_end[c] or (s + length < item_end[c] and text[s + length] != _SPACE):
            continue
        same = True
        for t in range(length):
            if data[lo[c] + t] != text[s + t]:
                same = False
                break
        out[c] = same
    return out


# --------------------------------------------------------------------------------------------
# The reference


@dataclass(frozen=True)
class Reference:
    """The reference items as every task needs them (items numbered 0..items-1).

    text: the items' normalized texts, concatenated (item i at item_offsets[i]..[i+1]).
    n-grams: one entry per distinct (n-gram hash, item), sorted by hash (then item, then
    position), with where the n-gram starts in `text` (its item follows from where it
    starts, its end from its words). Near-duplicates: every band key of every non-empty
    item, sorted, with its item. The shingle sets or signatures of verification are made
    from `text` for the few items that are candidates: 12 bytes per n-gram entry is all
    the reference holds besides its text.
    """

    items: int
    empty: int  # items whose text is null or empty once normalized: they match nothing
    text: U8Array
    item_offsets: I64Array
    gram_hash: U64Array
    gram_start: U32Array
    band_key: I64Array
    band_item: I32Array

    @property
    def ngrams(self) -> int:
        return len(self.gram_hash)

    @cached_property
    def gram_filter(self) -> tuple[U64Array, np.uint64]:
        """(bitmap, shift): bit `hash >> shift` is set for every n-gram entry's hash
        (`FILTER_BITS` per entry, a power of two; built where the reference is used)."""
        size = 64
        while size < FILTER_BITS * max(self.ngrams, 1):
            size *= 2
        shift = np.uint64(64 - (size.bit_length() - 1))
        return _filter_words(self.gram_hash, shift, size // 64), shift

    def item_of(self, start: I64Array) -> I64Array:
        return np.searchsorted(self.item_offsets, start, "right") - 1

    def item_texts(self, items: I64Array) -> pa.Array:
        return _texts(self.text, self.item_offsets[items], self.item_offsets[items + 1])


_ARRAYS = {
    "item_offsets": pa.int64(),
    "gram_hash": pa.uint64(),
    "gram_start": pa.uint32(),
    "band_key": pa.int64(),
    "band_item": pa.int32(),
}


def build_reference(texts: pa.Array | pa.ChunkedArray, p: DeconParams) -> Reference:
    """The reference of `texts` (item i is row i; a null or empty text matches nothing)."""
    sp = p.sign
    norm = normalized(texts, sp)
    starts, ends, data = text_buffers(norm)
    n = len(norm)
    base = int(starts[0]) if n else 0
    item_offsets = np.append(starts, ends[-1] if n else 0) - base  # normalize's rows are contiguous
    text = data[base : base + int(item_offsets[-1])].copy()
    if text.size >= 2**32:
        raise ValueError("the reference's normalized text exceeds 4 GiB")
    gram_hash, gram_start = np.empty(0, np.uint64), np.empty(0, np.uint32)
    if p.ngram:
        offsets, hashes = ngram_hashes(norm, p.ngram, sp.seed)
        row, pos = _all_ngrams(offsets)
        lo, _ = _ngram_spans(starts, ends, data, row, pos, p.ngram)
        order = np.lexsort((pos, row, hashes))  # hash, then item, then position
        first = order[_run_starts(hashes[order], row[order])]
        gram_hash, gram_start = hashes[first], (lo[first] - base).astype(np.uint32)
    band_key, band_item = np.empty(0, np.int64), np.empty(0, np.int32)
    if p.threshold is not None:
        keys = band_keys(text_signatures(norm, sp), sp.bands, sp.rows, sp.seed)
        valid = np.flatnonzero(ends > starts)  # an empty text's signature would match every empty one
        flat = keys[valid].ravel()
        order = np.argsort(flat, kind="stable")
        band_key, band_item = flat[order], np.repeat(valid, sp.bands)[order].astype(np.int32)
    empty = int((ends == starts).sum())
    return Reference(n, empty, text, item_offsets, gram_hash, gram_start, band_key, band_item)


def reference_bytes(ref: Reference) -> bytes:
    """The reference as one Arrow IPC stream (a one-row record batch of lists)."""
    cols = [
        pa.LargeListArray.from_arrays(
            pa.array([0, getattr(ref, name).size], pa.int64()), pa.array(getattr(ref, name), kind)
        )
        for name, kind in _ARRAYS.items()
    ]
    cols.append(pa.array([ref.text.tobytes()], pa.large_binary()))
    meta = {"items": str(ref.items), "empty": str(ref.empty)}
    batch = pa.RecordBatch.from_arrays(cols, names=[*_ARRAYS, "text"], metadata=meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def reference_from_bytes(payload: bytes) -> Reference:
    """`reference_bytes` read back; the arrays are views of `payload`, not copies."""
    batch = pa.ipc.open_stream(pa.py_buffer(payload)).read_next_batch()
    meta = {k.decode(): v.decode() for k, v in (batch.schema.metadata or {}).items()}
    arrays = {name: batch.column(name).values.to_numpy(zero_copy_only=True) for name in _ARRAYS}
    buf = batch.column("text").buffers()[2]
    text = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, np.uint8)
    return Reference(items=int(meta["items"]), empty=int(meta["empty"]), text=text, **arrays)


_LOADED: dict[str, Reference] = {}


def cached_reference(key: str, payload: Callable[[], bytes]) -> Reference:
    """The reference named `key`, parsed once per Python worker (tasks of one run share it;
    a new key replaces the old one)."""
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = reference_from_bytes(payload())
    return _LOADED[key]


# --------------------------------------------------------------------------------------------
# Matching a batch


def ngram_matches(norm: pa.Array, ref: Reference, n: int, seed: int) -> tuple[I64Array, I64Array, pa.Array]:
    """(row, item, n-gram) for each (row, item) sharing a word n-gram: the row's first such
    n-gram, as normalized text."""
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), pa.array([], pa.string()))
    offsets, hashes = ngram_hashes(norm, n, seed)
    if not ref.ngrams or not len(hashes):
        return empty
    bits, shift = ref.gram_filter
    left = _lookup(ref.gram_hash, bits, shift, hashes)
    found = np.flatnonzero(left >= 0)
    if not found.size:
        return empty
    row = np.searchsorted(offsets, found, "right") - 1  # sorted by row, then position
    pos = found - offsets[row]
    starts, ends, data = text_buffers(norm)
    lo, hi = _ngram_spans(starts, ends, data, row, pos, n)
    hit, entry = _expand(left[found], np.searchsorted(ref.gram_hash, hashes[found], "right"))
    start = ref.gram_start[entry].astype(np.int64)
    item = ref.item_of(start)
    same = _confirm(data, lo[hit], hi[hit], ref.text, start, ref.item_offsets[item + 1])
    hit, item = hit[same], item[same]
    order = np.lexsort((pos[hit], item, row[hit]))  # row, item, then position: the first n-gram
    chosen = order[_run_starts(row[hit][order], item[order])]
    h = hit[chosen]
    return row[h], item[chosen], _texts(data, lo[h], hi[h]).cast(pa.string())


def near_matches(
    norm: pa.Array, valid: I64Array, ref: Reference, p: DeconParams
) -> tuple[I64Array, I64Array, npt.NDArray[np.float64]]:
    """(row, item, similarity) for each candidate (row, item) whose similarity reaches the
    threshold; `valid` are the rows with text (an empty one shares nothing)."""
    sp = p.sign
    none = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if p.threshold is None or not len(ref.band_key) or not len(valid):
        return none
    sigs = text_signatures(norm, sp)
    keys = band_keys(sigs[valid], sp.bands, sp.rows, sp.seed).ravel()
    lo = np.searchsorted(ref.band_key, keys, "left")
    which, entry = _expand(lo, np.searchsorted(ref.band_key, keys, "right"))
    if not len(which):
        return none
    # Distinct (row, item): a pair sharing several bands is one candidate.
    pair = np.unique(valid[which // sp.bands] * ref.items + ref.band_item[entry])
    rows, items = pair // ref.items, pair % ref.items
    cand_rows, row_at = np.unique(rows, return_inverse=True)
    cand_items, item_at = np.unique(items, return_inverse=True)
    texts = ref.item_texts(cand_items)  # only the candidates' items are shingled or signed
    if p.verify == "exact":
        doc_sets = _shingles(norm.take(pa.array(cand_rows)), sp)
        sim = jaccard_between(*doc_sets, *_shingles(texts, sp), row_at, item_at)
    else:
        sim = estimate_jaccard(sigs[rows], text_signatures(texts, sp)[item_at])
    keep = sim >= p.threshold
    return rows[keep], items[keep], sim[keep]


def _shingles(norm: pa.Array, sp: SignParams) -> tuple[I64Array, U64Array]:
    return shingle_hashes(norm, sp.unit, sp.ngram, sp.char_ngram, sp.seed)


def match_schema(id_type: pa.DataType) -> pa.Schema:
    return pa.schema(
        [
            pa.field(C.DOC_ID, id_type),
            pa.field(REF, pa.int32()),
            pa.field(C.REASON, pa.string(), nullable=False),
            pa.field(C.SIMILARITY, pa.float64()),
            pa.field(NGRAM, pa.string()),
        ]
    )


def decontaminate_batch(batch: pa.RecordBatch, ref: Reference, p: DeconParams) -> pa.RecordBatch:
    """(_id, _text) -> (_id, _ref, reason, similarity, ngram), only for rows that are not kept:

    - a row that cannot be processed (null text, or empty once normalized): `_ref` null and
      the reason, as dedup's signing says it;
    - a match: one row per (document, reference item, reason): `near_duplicate` with the
      similarity, or `ngram` with the first shared n-gram's normalized text.
    """
    sp = p.sign
    text = batch.column(C.TEXT)
    norm = normalized(text, sp)
    empty = np.asarray(pc.equal(pc.binary_length(norm), 0))
    bad = np.flatnonzero(empty)
    reasons = pc.if_else(pc.is_null(text.take(pa.array(bad))), REASON_NULL, REASON_EMPTY)
    rows = [bad]
    refs = [pa.nulls(len(bad), pa.int32())]
    why = [reasons.cast(pa.string())]
    sims = [pa.nulls(len(bad), pa.float64())]
    grams = [pa.nulls(len(bad), pa.string())]
    if p.ngram:
        row, item, gram = ngram_matches(norm, ref, p.ngram, sp.seed)
        rows.append(row)
        refs.append(pa.array(item, pa.int32()))
        why.append(pa.repeat(pa.scalar(REASON_NGRAM), len(row)))
        sims.append(pa.nulls(len(row), pa.float64()))
        grams.append(gram)
    row, item, sim = near_matches(norm, np.flatnonzero(~empty), ref, p)
    rows.append(row)
    refs.append(pa.array(item, pa.int32()))
    why.append(pa.repeat(pa.scalar(REASON_NEAR), len(row)))
    sims.append(pa.array(sim, pa.float64()))
    grams.append(pa.nulls(len(row), pa.string()))
    ids = batch.column(C.DOC_ID).take(pa.array(np.concatenate(rows)))
    cols = [ids, *(pa.concat_arrays(parts) for parts in (refs, why, sims, grams))]
    return pa.RecordBatch.from_arrays(cols, schema=match_schema(ids.type))
