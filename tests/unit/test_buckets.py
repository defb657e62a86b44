"""Bucket edges and whole-group streaming against plain Python loops."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.arrow import run_starts, whole_groups
from neardup.kernels.buckets import pair_indices


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pair_indices_match_a_loop(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.choice([1, 1, 1, 2, 3, 4, 5, 6, 9, 32]) for _ in range(300)]
    starts = np.cumsum([0, *sizes[:-1]])
    left, right = pair_indices(starts, sizes)
    got = list(zip(left.tolist(), right.tolist(), strict=True))
    want = set()
    for start, m in zip(starts.tolist(), sizes, strict=True):
        want.update(itertools.combinations(range(start, start + m), 2))
    assert len(got) == len(set(got))  # each pair once
    assert set(got) == want


def test_pair_indices_of_nothing() -> None:
    for starts, sizes in (([], []), ([0, 1], [1, 1])):
        left, right = pair_indices(starts, sizes)
        assert left.size == right.size == 0


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
