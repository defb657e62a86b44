"""Which pairs of an LSH bucket become candidate edges, as row indices. Pure numpy.

A bucket of at most `all_pairs_up_to` documents gives every pair. A larger one gives a
star from its first (smallest) id: linear in its size, where all pairs of a
10,000-document bucket would be 50 million. A star loses a pair whose two documents are
both similar to each other but not to the centre (verification drops both centre
edges); on the benchmark corpus stars alone recalled 0.9956 of the true pairs and all
pairs in buckets of up to 32 documents 0.9996, for 32 % more candidates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64Array = npt.NDArray[np.int64]


def edge_indices(starts: I64Array, sizes: I64Array, all_pairs_up_to: int) -> tuple[I64Array, I64Array]:
    """(left, right) row indices of the candidate edges of buckets laid out contiguously:
    bucket g is rows starts[g] .. starts[g] + sizes[g] - 1, in ascending id order, so
    left < right and each edge runs from the smaller id. Buckets of one row give nothing.
    """
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    lefts: list[I64Array] = [np.empty(0, dtype=np.int64)]
    rights: list[I64Array] = [np.empty(0, dtype=np.int64)]
    big = sizes > max(all_pairs_up_to, 1)
    if big.any():
        s, m = starts[big], sizes[big] - 1  # m edges per star
        first = np.repeat(s, m)
        # 1, 2, ..., m within each star
        step = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m) + 1
        lefts.append(first)
        rights.append(first + step)
    # All pairs, one vectorized block per bucket size (at most all_pairs_up_to sizes).
    small = ~big & (sizes > 1)
    for size in np.unique(sizes[small]):
        s = starts[small & (sizes == size)]
        i, j = np.triu_indices(int(size), 1)
        lefts.append((s[:, None] + i).ravel())
        rights.append((s[:, None] + j).ravel())
    return np.concatenate(lefts), np.concatenate(rights)
