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
the batch's longest). A document of more than `TABLE_SHINGLES` shingles is sorted instead
(its distinct hashes by `np.unique`, looked up by binary search when it is the head), so
the tables' memory is bounded whatever the corpus's longest document.
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

# A set of more shingles than this is sorted (np.unique: 8 bytes a hash) instead of put in a
# table (16 bytes a slot, 2 to 4 slots a hash): the two tables stay within 16 MB, however
# long a document (2**18 word 5-grams are about 1.3 MB of text).
TABLE_SHINGLES = 1 << 18
_TABLE, _SORTED = 1, 2


@njit(cache=True, nogil=True, inline="always")
def _found(v: np.uint64, keys: U64Array, stamps: I64Array, stamp: int, bits: int) -> tuple[bool, np.intp]:
    """Whether v is in the table of 2**bits slots under `stamp`, and its slot (or where it
    goes)."""
    mask = (1 << bits) - 1
    s = np.intp(v >> np.uint64(64 - bits))
    while stamps[s] == stamp:
        if keys[s] == v:
            return True, s
        s = (s + 1) & mask
    return False, s


@njit(cache=True, nogil=True)
def _fill(hashes: U64Array, c: int, table: tuple[U64Array, I64Array, int, int], compact: bool) -> int:
    """Put hashes[:c] in `table` (keys, stamps, stamp, bits); return how many are distinct.
    With `compact`, they are also moved to the front of `hashes` in their order (a value is
    only written at or before where it was read)."""
    keys, stamps, stamp, bits = table
    distinct = 0
    for t in range(c):
        v = hashes[t]
        seen, s = _found(v, keys, stamps, stamp, bits)
        if seen:
            continue
        keys[s] = v
        stamps[s] = stamp
        if compact:
            hashes[distinct] = v
        distinct += 1
    return distinct


@njit(cache=True, nogil=True)
def _shared(values: U64Array, head: tuple[U64Array, I64Array, int, int], ordered: U64Array, mode: int) -> int:
    """How many of `values` (distinct) are in the head's set: its table (`mode` _TABLE) or
    its sorted distinct hashes `ordered` (_SORTED)."""
    head_keys, head_stamps, head_stamp, head_bits = head
    shared = 0
    for v in values:
        if mode == _TABLE:
            if _found(v, head_keys, head_stamps, head_stamp, head_bits)[0]:
                shared += 1
        elif mode == _SORTED:
            i = np.searchsorted(ordered, v)
            if i < ordered.shape[0] and ordered[i] == v:
                shared += 1
    return shared


@njit(cache=True, nogil=True)
def _shingles(
    data: U8Array,
    start: int,
    end: int,
    word_mode: bool,
    n: int,
    char_n: int,
    shingle_keys: U64Array,
    ring: U64Array,
    buf: U64Array,
) -> tuple[U64Array, int]:
    """The document's shingle hashes in buf[:c] (buf grown if need be): (buf, c)."""
    c = _doc_shingle_count(data, start, end, word_mode, n, char_n)
    if buf.shape[0] < c:
        buf = np.empty(c, dtype=np.uint64)
    return buf, doc_shingles(data, start, end, word_mode, n, char_n, shingle_keys, ring, buf, 0)


@njit(cache=True, nogil=True)
def _table(keys: U64Array, stamps: I64Array, stamp: int, c: int) -> tuple[U64Array, I64Array, int, int]:
    """A table for c hashes: the arrays (grown, with fresh stamps, if too small), the next
    stamp and the bits."""
    bits = 4
    while (1 << bits) < 2 * c:
        bits += 1
    if keys.shape[0] < (1 << bits):
        keys = np.empty(1 << bits, dtype=np.uint64)
        stamps = np.zeros(1 << bits, dtype=np.int64)
        stamp = 0
    return keys, stamps, stamp + 1, bits


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
    ring = np.empty(2 * max(n, 1), dtype=np.uint64)
    buf = np.empty(16, dtype=np.uint64)
    head_table = np.empty(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), 0, 0
    table = head_table
    ordered = np.empty(0, dtype=np.uint64)  # the head's sorted distinct hashes, when too many
    mode = _TABLE
    head = -1
    head_size = 0
    for p in range(members.shape[0]):
        h = head_of[members[p]]
        if h != head:
            head = h
            if h == rows:
                hashes, c = carried, carried.shape[0]
            else:
                buf, c = _shingles(data, starts[h], ends[h], word_mode, n, char_n, shingle_keys, ring, buf)
                hashes = buf
            if c > TABLE_SHINGLES:
                ordered = np.unique(hashes[:c])
                head_size, mode = ordered.shape[0], _SORTED
            else:
                head_table = _table(head_table[0], head_table[1], head_table[2], c)
                head_size = _fill(hashes, c, head_table, False)
                mode = _TABLE
        m = members[p]
        buf, c = _shingles(data, starts[m], ends[m], word_mode, n, char_n, shingle_keys, ring, buf)
        if c > TABLE_SHINGLES:
            distinct = np.unique(buf[:c])
            size = distinct.shape[0]
            inter = _shared(distinct, head_table, ordered, mode)
        else:
            table = _table(table[0], table[1], table[2], c)
            size = _fill(buf, c, table, True)
            inter = _shared(buf[:size], head_table, ordered, mode)
        union = head_size + size - inter
        out[p] = inter / union if union > 0 else 0.0
    # The last row's head, for a group that goes on in the next batch.
    last = head_of[rows - 1] if rows else rows
    if last == rows:
        return out, carried.copy()
    tail, c = _shingles(data, starts[last], ends[last], word_mode, n, char_n, shingle_keys, ring, buf)
    return out, tail[:c].copy()


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
