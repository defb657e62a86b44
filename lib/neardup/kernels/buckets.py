"""Which pairs of an LSH bucket become candidate edges. Pure numpy.

A bucket of at most `lsh.all_pairs_up_to` documents gives every pair (here, as row
indices). A larger one gives a star from its smallest id, row by row, without its rows
ever being gathered (`lsh.py`): linear in its size, where all pairs of a
10,000-document bucket would be 50 million. A star loses a pair whose two documents
are similar to each other but not to the centre (verification drops both centre
edges); on the benchmark corpus stars alone recalled 0.9956 of the true pairs and all
pairs in buckets of up to 32 documents 0.9996, for 32 % more candidates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64Array = npt.NDArray[np.int64]


def pair_indices(starts: npt.ArrayLike, sizes: npt.ArrayLike) -> tuple[I64Array, I64Array]:
    """(left, right) row indices of every pair within each bucket, buckets laid out
    contiguously: bucket g is rows starts[g] .. starts[g] + sizes[g] - 1. left < right,
    so with rows in ascending id order each edge runs from the smaller id.

    One vectorized block per distinct bucket size, not a loop per bucket or row.
    """
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    lefts: list[I64Array] = [np.empty(0, dtype=np.int64)]
    rights: list[I64Array] = [np.empty(0, dtype=np.int64)]
    for size in np.unique(sizes[sizes > 1]):
        s = starts[sizes == size]
        i, j = np.triu_indices(int(size), 1)
        lefts.append((s[:, None] + i).ravel())
        rights.append((s[:, None] + j).ravel())
    return np.concatenate(lefts), np.concatenate(rights)
