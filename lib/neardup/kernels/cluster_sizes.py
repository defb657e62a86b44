"""Cluster sizes on the driver's arrays: what stages/membership.cluster_sizes computes with a
join, an aggregation and an anti-join, for a guard whose rows and exact groups the driver
holds already (within the broadcast bound), where those jobs cost more than the arithmetic.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels import id_arrays


def cluster_sizes(
    ids: np.ndarray, kept: np.ndarray, reps: np.ndarray, copies: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The clustered representatives (`ids`, each with its kept document `kept`) and the
    exact groups with copies (`reps`, each with its number of `copies`) -> (kept document,
    size in documents) for every kept document of `kept`, and for every group whose
    representative is not in `ids` (an exact group alone is a cluster of its own).

    A representative counts with its copies. The rows are those of the Spark version,
    in no particular order. Ids of any type the driver takes, at the cost of integers
    (kernels/id_arrays.py)."""
    order = id_arrays.argsort(reps)
    reps, copies = reps[order], copies[order].astype(np.int64)
    weights = np.ones(len(ids), np.int64)
    place = id_arrays.lookup(reps, ids)
    found = place >= 0
    weights[found] += copies[place[found]]
    kept_ids, at, _ = id_arrays.unique(kept)
    sizes = np.bincount(at, weights=weights, minlength=len(kept_ids)).astype(np.int64)
    alone = ~id_arrays.isin(reps, ids)
    return np.concatenate([kept_ids, reps[alone]]), np.concatenate([sizes, copies[alone] + 1])


def size_figures(sizes: np.ndarray) -> dict[str, int]:
    """Clusters of more than one document, the largest (1 when none), and the documents
    removed (each cluster's size but its kept one), as stages/membership computes them."""
    return {
        "clusters": int((sizes > 1).sum()),
        "largest": int(sizes.max()) if len(sizes) else 1,
        "removed": int((sizes - 1).sum()),
    }
