"""Bucket edges and whole-group streaming against plain Python loops."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pyarrow as pa
import pytest

from neardup.arrowgroups import run_starts, whole_groups
from neardup.buckets import edge_indices


def _expected(sizes: list[int], cap: int) -> set[tuple[int, int]]:
    edges, row = set(), 0
    for m in sizes:
        rows = list(range(row, row + m))
        if m <= cap:
            edges.update(itertools.combinations(rows, 2))
        else:
            edges.update((rows[0], r) for r in rows[1:])
        row += m
    return edges


@pytest.mark.parametrize("cap", [1, 2, 3, 5, 32])
def test_edge_indices_match_a_loop(cap: int) -> None:
    rng = random.Random(cap)
    sizes = [rng.choice([1, 1, 1, 2, 3, 4, 5, 6, 9, 40]) for _ in range(300)]
    starts = np.cumsum([0, *sizes[:-1]])
    left, right = edge_indices(starts, np.array(sizes), cap)
    got = list(zip(left.tolist(), right.tolist(), strict=True))
    assert len(got) == len(set(got))  # each edge once
    assert set(got) == _expected(sizes, cap)
    assert (left < right).all()


def test_edge_indices_of_nothing() -> None:
    left, right = edge_indices(np.array([], np.int64), np.array([], np.int64), 32)
    assert left.size == right.size == 0
    left, right = edge_indices(np.array([0, 1]), np.array([1, 1]), 32)
    assert left.size == 0


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 7, 1000])
def test_whole_groups_never_split_a_group(batch_rows: int) -> None:
    rng = random.Random(batch_rows)
    keys: list[str] = []
    for g in range(60):
        keys += [f"k{g:03d}"] * rng.choice([1, 2, 5, 11])
    table = pa.table({"k": keys, "v": list(range(len(keys)))})
    out = list(whole_groups(table.to_batches(max_chunksize=batch_rows), "k"))
    assert pa.concat_tables(out).equals(table)  # every row, once, in order
    seen: set[str] = set()
    for t in out:
        ks = set(t.column("k").to_pylist())
        assert not ks & seen, "a group was split between two tables"
        seen |= ks
    assert list(whole_groups(iter([]), "k")) == []


def test_run_starts_any_type() -> None:
    for values in (["a", "a", "b", "a", "c", "c"], [3, 3, 1, 3, 2, 2]):
        assert run_starts(pa.array(values)).tolist() == [0, 2, 3, 4]
    assert run_starts(pa.chunked_array([[1, 1], [1, 2]])).tolist() == [0, 3]
    assert run_starts(pa.array([], pa.int64())).tolist() == []
