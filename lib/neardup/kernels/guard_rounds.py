"""The over-merge guard's rounds on the driver's arrays (stages/guard.py says what the guard
does; stages/guard_driver.py runs these between its scoring jobs). Documents are codes:
indices into the sorted ids of the clustered documents, so an edge is a pair of codes and
the survivor policy is a rank per code. Pure numpy and scipy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.kernels.graph_labels import smallest_labels

I64Array = npt.NDArray[np.int64]


def pair_keys(a: I64Array, b: I64Array, n: int) -> I64Array:
    """One int64 per unordered pair of codes below `n` (n * n fits: n is within the
    broadcast bound)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo * np.int64(n) + hi


class EdgeIndex:
    """The verified edges' similarities, looked up by pair (the first of repeated pairs)."""

    def __init__(self, src: I64Array, dst: I64Array, similarity: np.ndarray, n: int):
        keys = pair_keys(src, dst, n)
        self.keys, first = np.unique(keys, return_index=True)
        self.similarity = similarity[first].astype(np.float64)
        self.n = n

    def lookup(self, a: I64Array, b: I64Array) -> np.ndarray:
        """Each pair's similarity, NaN where no verified edge joins the two."""
        out = np.full(len(a), np.nan)
        if len(self.keys) == 0 or len(a) == 0:
            return out
        keys = pair_keys(a, b, self.n)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        hit = self.keys[at] == keys
        out[hit] = self.similarity[at[hit]]
        return out


def regroup(
    failing: I64Array, src: I64Array, dst: I64Array, rank: I64Array
) -> tuple[I64Array, I64Array, I64Array]:
    """The failing documents re-clustered over their own verified edges (both ends failing)
    -> (the documents of those clusters, the kept one of each, by the lowest `rank`; the
    failing documents in no such edge, each alone)."""
    is_failing = np.zeros(len(rank), bool)
    is_failing[failing] = True
    own = is_failing[src] & is_failing[dst]
    nodes, labels = smallest_labels(src[own], dst[own])
    # Within each component (its label), the node ranked first by the survivor policy.
    order = np.lexsort((rank[nodes], labels))
    ordered = labels[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(order) else order
    # Labels are codes (each component's smallest): the best node of each, by label.
    best = np.zeros(len(rank), np.int64)
    best[ordered[starts]] = nodes[order[starts]]
    kept = best[labels]
    alone = failing[~np.isin(failing, nodes)]
    return nodes.astype(np.int64), kept, alone.astype(np.int64)
