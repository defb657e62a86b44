"""Pure similarity kernels used by verification: signatures decoded from Arrow
binary columns, and exact Jaccard of sorted shingle-hash sets. (The signature
estimate itself is `neardup.minhash.estimate_jaccard`.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit


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
def _pair_jaccard(oa: np.ndarray, ha: np.ndarray, ob: np.ndarray, hb: np.ndarray) -> np.ndarray:
    n = oa.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for p in range(n):
        i, iend = oa[p], oa[p + 1]
        j, jend = ob[p], ob[p + 1]
        la, lb = iend - i, jend - j
        inter = 0
        while i < iend and j < jend:
            x, y = ha[i], hb[j]
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


def exact_jaccard(
    offsets_a: np.ndarray, hashes_a: np.ndarray, offsets_b: np.ndarray, hashes_b: np.ndarray
) -> np.ndarray:
    """Jaccard of set i of A with set i of B; each set is a sorted unique slice of uint64
    hashes (hashes[offsets[i]:offsets[i+1]]). Two empty sets score 0."""
    return _pair_jaccard(
        np.ascontiguousarray(offsets_a, dtype=np.int64),
        np.ascontiguousarray(hashes_a, dtype=np.uint64),
        np.ascontiguousarray(offsets_b, dtype=np.int64),
        np.ascontiguousarray(hashes_b, dtype=np.uint64),
    )
