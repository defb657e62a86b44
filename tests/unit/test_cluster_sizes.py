"""kernels/cluster_sizes.py against sizes counted document by document, with string and
integer ids, groups inside and outside the clusters, and no groups at all."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from neardup.kernels.cluster_sizes import cluster_sizes, size_figures


def _case(seed: int, strings: bool, groups: bool) -> tuple[list, list, list, list]:
    rng = random.Random(seed)
    name = (lambda i: f"doc-{i}") if strings else (lambda i: i * 3 + 1)
    docs = list(range(60))
    rng.shuffle(docs)
    ids, kept = [], []
    while len(docs) > 15:  # clusters of 1-5 representatives (a guard can leave one alone)
        k = rng.randint(1, 5)
        group, docs = docs[:k], docs[k:]
        ids += [name(d) for d in group]
        kept += [name(group[0])] * k
    reps = [name(d) for d in rng.sample(range(60), 20)] if groups else []
    copies = [rng.randint(1, 4) for _ in reps]
    return ids, kept, reps, copies


def _by_hand(ids: list, kept: list, reps: list, copies: list) -> Counter:
    """Every document counted once under its cluster's kept document: each clustered
    representative and its copies, and each group outside the clusters on its own."""
    sizes: Counter = Counter()
    copies_of = dict(zip(reps, copies, strict=True))
    for i, k in zip(ids, kept, strict=True):
        sizes[k] += 1 + copies_of.get(i, 0)
    for r, c in copies_of.items():
        if r not in ids:
            sizes[r] += 1 + c
    return sizes


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("groups", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_sizes_and_figures_against_documents_counted(seed: int, strings: bool, groups: bool) -> None:
    ids, kept, reps, copies = _case(seed, strings, groups)
    as_array = (
        (lambda xs: np.array(xs, dtype=object)) if strings else (lambda xs: np.array(xs, dtype=np.int64))
    )
    got_ids, got_sizes = cluster_sizes(
        as_array(ids), as_array(kept), as_array(reps), np.array(copies, np.int64)
    )
    want = _by_hand(ids, kept, reps, copies)
    assert len(got_ids) == len(want)
    assert dict(zip(got_ids.tolist(), got_sizes.tolist(), strict=True)) == dict(want)
    assert size_figures(got_sizes) == {
        "clusters": sum(n > 1 for n in want.values()),
        "largest": max(want.values()),
        "removed": sum(n - 1 for n in want.values()),
    }


def test_no_rows() -> None:
    got_ids, got_sizes = cluster_sizes(
        np.array([], np.int64), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64)
    )
    assert len(got_ids) == 0 and size_figures(got_sizes) == {"clusters": 0, "largest": 1, "removed": 0}
