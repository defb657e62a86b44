"""The guard's driver rounds' arithmetic against plain Python: a dict of edges, and
components found by breadth-first search with the best-ranked node of each kept."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from neardup.kernels.guard_rounds import EdgeIndex, regroup


def _graph(seed: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    src, dst = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    return src.astype(np.int64), dst.astype(np.int64), rng.random(len(src)).round(3)


@pytest.mark.parametrize("seed", range(5))
def test_edge_lookup_matches_a_dict(seed: int) -> None:
    n = 60
    src, dst, sim = _graph(seed, n, 150)
    first: dict[tuple[int, int], float] = {}
    for s, d, x in zip(src.tolist(), dst.tolist(), sim.tolist(), strict=True):
        first.setdefault((s, d), x)
    index = EdgeIndex(src, dst, sim, n)
    rng = np.random.default_rng(seed + 100)
    a, b = rng.integers(0, n, 500), rng.integers(0, n, 500)
    got = index.lookup(a, b)
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist(), strict=True):
        want = first.get((min(x, y), max(x, y)))
        assert (np.isnan(g) and want is None) or g == want
    assert np.isnan(EdgeIndex(src[:0], dst[:0], sim[:0], n).lookup(a, b)).all()


@pytest.mark.parametrize("seed", range(5))
def test_regroup_matches_breadth_first_search(seed: int) -> None:
    n = 80
    src, dst, _ = _graph(seed, n, 90)
    rng = np.random.default_rng(seed + 200)
    failing = np.sort(rng.choice(n, 40, replace=False)).astype(np.int64)
    rank = rng.permutation(n).astype(np.int64)
    nodes, kept, alone = regroup(failing, src, dst, rank)

    fail = set(failing.tolist())
    adjacent: dict[int, set[int]] = {}
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        if s in fail and d in fail:
            adjacent.setdefault(s, set()).add(d)
            adjacent.setdefault(d, set()).add(s)
    want: dict[int, int] = {}
    for start in sorted(adjacent):
        if start in want:
            continue
        seen, queue = {start}, deque([start])
        while queue:
            for y in adjacent[queue.popleft()] - seen:
                seen.add(y)
                queue.append(y)
        best = min(seen, key=lambda x: rank[x])
        want.update(dict.fromkeys(seen, best))
    assert dict(zip(nodes.tolist(), kept.tolist(), strict=True)) == want
    assert sorted(alone.tolist()) == sorted(fail - set(adjacent))
