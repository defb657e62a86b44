"""Exact copies grouped in one process: each row's representative. Pure numpy and pyarrow.

The exact stage's distributed path is a window over the 128-bit text hash ordered by the
survivor policy (stages/exact.py); within the broadcast bound the driver does the same
from one collect: a sort of the hashes finds the groups (most are one document), and only
the rows of groups with copies are sorted by the policy's keys (kernels/policy_order.py,
whose order is Spark's for the key types the stage sends here), so the representative is
the window's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from neardup.kernels.policy import SortKey
from neardup.kernels.policy_order import best_of_groups

I64Array = npt.NDArray[np.int64]


def exact_reps(hi: npt.ArrayLike, lo: npt.ArrayLike, order: pa.Table, keys: Sequence[SortKey]) -> I64Array:
    """For each row, the index of its group's representative: rows with equal (hi, lo) are
    a group, and its representative the first of them by `keys` (columns of `order`, one
    row per row, best first; nulls last). A row alone is its own."""
    hi = np.asarray(hi, dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64)
    n = len(hi)
    if len(lo) != n or order.num_rows != n:
        raise ValueError(f"{n} hashes, {len(lo)} low halves and {order.num_rows} rows to order")
    rep = np.arange(n, dtype=np.int64)
    if n < 2:
        return rep
    by_hash = np.lexsort((lo, hi))
    h, l_ = hi[by_hash], lo[by_hash]
    same = (h[1:] == h[:-1]) & (l_[1:] == l_[:-1])
    if not same.any():
        return rep
    # Rows (in hash order) of groups with copies, and their group numbers.
    copied = np.zeros(n, dtype=bool)
    copied[1:] |= same
    copied[:-1] |= same
    starts = np.concatenate(([True], ~same))
    group = np.cumsum(starts) - 1
    rows = by_hash[copied]
    rep[rows] = rows[best_of_groups(group[copied], order.take(pa.array(rows)), keys)]
    return rep
