"""Connected components on the driver: each node's label is the smallest id of its
component, the labels the distributed rounds give (stages/components.py collects a graph
small enough here). Pure numpy and scipy.
"""

from __future__ import annotations

import numpy as np

from neardup.kernels import id_arrays


def smallest_labels(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges as two equal-length arrays of ids (no nulls) -> (nodes, the smallest node of
    each one's component), nodes sorted ascending, one entry per node of the edges."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as scipy_components

    # Sorted: node i is the i-th smallest id, so a component's smallest index is its
    # smallest id (strings sort by code point, which is Spark's UTF-8 byte order).
    nodes, codes, _ = id_arrays.unique(np.concatenate([src, dst]))
    n, m = len(nodes), len(src)
    if n == 0:
        return nodes, nodes
    graph = coo_matrix((np.ones(m, dtype=np.int8), (codes[:m], codes[m:])), shape=(n, n))
    _, label = scipy_components(graph, directed=False)
    # The first index of each label, in ascending index order, is its smallest node.
    _, first = np.unique(label, return_index=True)
    return nodes, nodes[first[label]]
