"""Exact Jaccard of each member of a group to the group's head, from the texts' shingle
hashes, with hash sets instead of sorted sets.

Verification scores a group (a head and the documents it has candidate edges to) by the
Jaccard of each member's shingle set with the head's. Sorting every document's hashes to
intersect sorted sets cost about 10 us of the 16 us a document took to shingle (1M-document
benchmark, 500 words each); here the head's distinct hashes go into one open-addressing
table, and each member's hashes are deduplicated in a second while they are looked up in
the first: no sort, a few nanoseconds a hash, and the counts are exactly the sorted sets'
(|A|, |B| distinct, |A and B|), so the similarities are the same floats.

The tables are reused for every document: a slot belongs to the current set when its stamp
is the set's number, so nothing is cleared between documents, and a document uses only the
first 2**bits slots, bits for twice its shingles (a short text stays in cache however long
the batch's longest).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.kernels.hashing import _doc_shingle_count, doc_shingles
from neardup.kernels.jit import njit

U64Array = npt.NDArray[np.uint64]
I64Array = npt.NDArray[np.int64]
U8Array = npt.NDArray[np.uint8]
F64Array = npt.NDArray[np.float64]


@njit(cache=True, nogil=True)
def _bits_for(c: int) -> int:
    """Bits of a table with at least 2c slots (load at most one half)."""
    bits = 4
    while (1 << bits) < 2 * c:
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def _grown(arr: np.ndarray, size: int) -> np.ndarray:
    if arr.shape[0] >= size:
        return arr
    return np.zeros(size, dtype=arr.dtype)


@njit(cache=True, nogil=True)
def _fill(hashes: U64Array, c: int, keys: U64Array, stamps: I64Array, stamp: int, bits: int) -> int:
    """Put hashes[:c] in the table of 2**bits slots under `stamp`; return how many distinct."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    distinct = 0
    for t in range(c):
        v = hashes[t]
        s = np.intp(v >> shift)
        seen = False
        while stamps[s] == stamp:
            if keys[s] == v:
                seen = True
                break
            s = (s + 1) & mask
        if not seen:
            keys[s] = v
            stamps[s] = stamp
            distinct += 1
    return distinct


@njit(cache=True, nogil=True)
def _in_table(v: np.uint64, keys: U64Array, stamps: I64Array, stamp: int, bits: int) -> bool:
    mask = (1 << bits) - 1
    s = np.intp(v >> np.uint64(64 - bits))
    while stamps[s] == stamp:
        if keys[s] == v:
            return True
        s = (s + 1) & mask
    return False


@njit(cache=True, nogil=True)
def _jaccard_to_heads_kernel(
    starts: I64Array,
    ends: I64Array,
    data: U8Array,
    word_mode: bool,
    n: int,
    char_n: int,
    shingle_keys: U64Array,
    head_of: I64Array,
    members: I64Array,
    carried: U64Array,
) -> tuple[F64Array, U64Array]:
    rows = starts.shape[0]
    out = np.empty(members.shape[0], dtype=np.float64)
    ring = np.empty(max(n, 1), dtype=np.uint64)
    buf = np.empty(16, dtype=np.uint64)
    head_keys = np.zeros(16, dtype=np.uint64)
    head_stamps = np.zeros(16, dtype=np.int64)
    keys = np.zeros(16, dtype=np.uint64)
    stamps = np.zeros(16, dtype=np.int64)
    stamp = 0  # the current member's set; the head's table has its own counter
    head_stamp = 0
    head = -1
    head_bits = 4
    head_size = 0
    for p in range(members.shape[0]):
        h = head_of[members[p]]
        if h != head:
            head = h
            if h == rows:
                c = carried.shape[0]
                hashes = carried
            else:
                c = _doc_shingle_count(data, starts[h], ends[h], word_mode, n, char_n)
                buf = _grown(buf, c)
                c = doc_shingles(data, starts[h], ends[h], word_mode, n, char_n, shingle_keys, ring, buf, 0)
                hashes = buf
            head_bits = _bits_for(c)
            head_keys = _grown(head_keys, 1 << head_bits)
            if head_stamps.shape[0] < (1 << head_bits):
                head_stamps = np.zeros(1 << head_bits, dtype=np.int64)
                head_stamp = 0
            head_stamp += 1
            head_size = _fill(hashes, c, head_keys, head_stamps, head_stamp, head_bits)
        m = members[p]
        c = _doc_shingle_count(data, starts[m], ends[m], word_mode, n, char_n)
        buf = _grown(buf, c)
        c = doc_shingles(data, starts[m], ends[m], word_mode, n, char_n, shingle_keys, ring, buf, 0)
        bits = _bits_for(c)
        keys = _grown(keys, 1 << bits)
        if stamps.shape[0] < (1 << bits):
            stamps = np.zeros(1 << bits, dtype=np.int64)
            stamp = 0
        stamp += 1
        mask = (1 << bits) - 1
        shift = np.uint64(64 - bits)
        size = 0
        inter = 0
        for t in range(c):
            v = buf[t]
            s = np.intp(v >> shift)
            seen = False
            while stamps[s] == stamp:
                if keys[s] == v:
                    seen = True
                    break
                s = (s + 1) & mask
            if not seen:
                keys[s] = v
                stamps[s] = stamp
                size += 1
                if _in_table(v, head_keys, head_stamps, head_stamp, head_bits):
                    inter += 1
        union = head_size + size - inter
        out[p] = inter / union if union > 0 else 0.0
    # The last row's head, for a group that goes on in the next batch.
    last = head_of[rows - 1] if rows else rows
    if last == rows:
        return out, carried.copy()
    c = _doc_shingle_count(data, starts[last], ends[last], word_mode, n, char_n)
    tail = np.empty(c, dtype=np.uint64)
    c = doc_shingles(data, starts[last], ends[last], word_mode, n, char_n, shingle_keys, ring, tail, 0)
    return out, tail


def jaccard_to_heads(
    starts: I64Array,
    ends: I64Array,
    data: U8Array,
    word_mode: bool,
    n: int,
    char_n: int,
    shingle_keys: U64Array,
    head_of: I64Array,
    members: I64Array,
    carried: U64Array,
) -> tuple[F64Array, U64Array]:
    """Jaccard of the shingle set of row members[p] with that of row head_of[members[p]],
    for each p (rows: data[starts[i]:ends[i]], normalized texts). A head of `len(starts)`
    stands for `carried`, the shingle hashes of a head in an earlier batch (duplicates
    allowed). Members must come grouped by head (each head's members together). Two empty
    sets score 0, as `similarity.jaccard_of_pairs` has them.

    Returns the similarities and the shingle hashes of the last row's head (in text order,
    duplicates kept): what the next batch carries.
    """
    return _jaccard_to_heads_kernel(
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(ends, dtype=np.int64),
        data,
        bool(word_mode),
        int(n),
        int(char_n),
        shingle_keys,
        np.ascontiguousarray(head_of, dtype=np.int64),
        np.ascontiguousarray(members, dtype=np.int64),
        np.ascontiguousarray(carried, dtype=np.uint64),
    )
