"""Pure similarity kernels used by verification: signatures decoded from Arrow
binary columns, and exact Jaccard of sorted shingle-hash sets, within one collection of
sets or between two. (The signature estimate itself is
`neardup.kernels.minhash.estimate_jaccard`.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.kernels.jit import njit


def signature_matrix(col: pa.Array | pa.ChunkedArray, num_perm: int) -> np.ndarray:
    """A binary column of num_perm little-endian uint32 slots per row -> (n, num_perm) uint32.

    Zero-copy when the column is one contiguous chunk (the usual case in a batch).
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    width = 4 * num_perm
    if col.null_count:
        raise ValueError("signature column has nulls")
    fixed = col.cast(pa.binary(width))
    data = fixed.buffers()[1]
    flat = np.frombuffer(data, dtype="<u4", count=(fixed.offset + len(fixed)) * num_perm)
    return flat[fixed.offset * num_perm :].reshape(len(fixed), num_perm)


@njit(cache=True, nogil=True)
def _jaccard_between(
    offsets_a: np.ndarray,
    hashes_a: np.ndarray,
    offsets_b: np.ndarray,
    hashes_b: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    out = np.empty(left.shape[0], dtype=np.float64)
    for p in range(left.shape[0]):
        i, iend = offsets_a[left[p]], offsets_a[left[p] + 1]
        j, jend = offsets_b[right[p]], offsets_b[right[p] + 1]
        la, lb = iend - i, jend - j
        inter = 0
        while i < iend and j < jend:
            x, y = hashes_a[i], hashes_b[j]
            if x == y:
                inter += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        union = la + lb - inter
        out[p] = inter / union if union > 0 else 0.0
    return out


def jaccard_of_pairs(
    offsets: np.ndarray, hashes: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """Jaccard of set left[p] with set right[p], for each p; set i is the sorted unique slice
    hashes[offsets[i]:offsets[i+1]] of uint64 hashes. Two empty sets score 0.

    One collection of sets and index pairs: a document compared with several others has
    its set computed and stored once.
    """
    return jaccard_between(offsets, hashes, offsets, hashes, left, right)


def _collection(offsets: np.ndarray, hashes: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, ...]:
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    n_sets = len(offsets) - 1
    if idx.size and (idx.min() < 0 or idx.max() >= n_sets):
        raise IndexError(f"set index out of range 0..{n_sets - 1}")
    return offsets, np.ascontiguousarray(hashes, dtype=np.uint64), idx


def jaccard_between(
    offsets_a: np.ndarray,
    hashes_a: np.ndarray,
    offsets_b: np.ndarray,
    hashes_b: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
) -> np.ndarray:
    """Jaccard of set left[p] of collection a with set right[p] of collection b (each as in
    `jaccard_of_pairs`): a batch's documents against a broadcast reference's, without
    copying either collection into the other."""
    if np.shape(left) != np.shape(right) or np.ndim(left) != 1:
        raise ValueError("left and right must be 1-d index arrays of the same length")
    oa, ha, left = _collection(offsets_a, hashes_a, left)
    ob, hb, right = _collection(offsets_b, hashes_b, right)
    return _jaccard_between(oa, ha, ob, hb, left, right)
