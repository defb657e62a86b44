"""The driver's component labels (kernels/graph_labels.py) against breadth-first search,
without a JVM: paths, stars, cycles, isolated pairs, string ids and shuffled edge order."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.kernels.graph_labels import smallest_labels
from neardup_testkit.reference import bfs_components


def _graph(seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    edges = [(i, i + 1) for i in range(1000, 1300)]  # a long path
    edges += [(5000, 5000 + k) for k in range(1, 400)]  # a star
    edges += [(9000 + k, 9000 + (k + 1) % 50) for k in range(50)]  # a cycle
    edges += [(20000 + 2 * k, 20001 + 2 * k) for k in range(200)]  # pairs
    edges += [(int(a), int(b)) for a, b in rng.integers(30000, 31000, size=(600, 2)) if a != b]  # random
    order = rng.permutation(len(edges))
    # Either direction: the labels do not depend on it.
    return [edges[i] if i % 2 else edges[i][::-1] for i in order]


@pytest.mark.parametrize("seed", [1, 2])
def test_labels_are_the_smallest_id_reachable(seed: int) -> None:
    edges = _graph(seed)
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    nodes, labels = smallest_labels(src, dst)
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == bfs_components([], edges)
    assert nodes.tolist() == sorted(nodes.tolist())


def test_string_ids_take_code_point_order() -> None:
    """Spark orders strings by UTF-8 bytes, which is code point order: the label is the
    smallest id in that order ("Z" < "a" < "é")."""
    edges = [("é", "a"), ("a", "Z"), ("b", "c"), ("c", "bb"), ("x", "x")]
    src = np.array([a for a, _ in edges], dtype=object)
    dst = np.array([b for _, b in edges], dtype=object)
    nodes, labels = smallest_labels(src, dst)
    assert dict(zip(nodes.tolist(), labels.tolist(), strict=True)) == bfs_components([], edges)


def test_no_edges_no_nodes() -> None:
    nodes, labels = smallest_labels(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert nodes.tolist() == [] and labels.tolist() == []
