"""Exact groups' representatives on the driver, against sorting each group in plain Python."""

from __future__ import annotations

import functools
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from neardup import columns as C
from neardup.kernels.exact_reps import exact_reps
from neardup.kernels.policy import SortKey


def _compare(a: dict[str, Any], b: dict[str, Any], keys: list[SortKey]) -> int:
    """Spark's order of two rows by `keys`: nulls last, strings by their UTF-8 bytes."""
    for key in keys:
        x, y = a[key.column], b[key.column]
        if x == y:
            continue
        if x is None or y is None:
            return 1 if x is None else -1
        if isinstance(x, str):
            x, y = x.encode(), y.encode()
        less = x < y
        return (1 if less else -1) if key.descending else (-1 if less else 1)
    return 0


def _expected(rows: list[dict[str, Any]], keys: list[SortKey]) -> list[int]:
    groups: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["hi"], r["lo"]), []).append(i)
    want = list(range(len(rows)))
    order = functools.cmp_to_key(lambda i, j: _compare(rows[i], rows[j], keys))
    for members in groups.values():
        best = min(members, key=order)
        for i in members:
            want[i] = best
    return want


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "keys",
    [
        [SortKey(C.LENGTH, True), SortKey(C.DOC_ID, False)],
        [SortKey(C.RANK, False), SortKey(C.DOC_ID, False)],
        [SortKey(C.PRIORITY, False), SortKey(C.RANK, True), SortKey(C.DOC_ID, False)],
    ],
    ids=["longest", "earliest", "priority-then-quality"],
)
def test_each_group_is_represented_by_its_best_row(seed: int, keys: list[SortKey]) -> None:
    rng = random.Random(seed)
    n = 600
    strings = seed == 2  # string ids and ranks, with bytes that order unlike code points' UTF-16
    ids: list[Any] = rng.sample(range(-5000, 5000), n)
    if strings:
        ids = [f"d{rng.choice(['é', 'z', 'a', '日'])}{i}" for i in ids]
    rows = [
        {
            "hi": rng.randrange(40),  # many groups share the high half only
            "lo": rng.randrange(8),
            C.DOC_ID: ids[i],
            C.LENGTH: rng.randrange(5),  # ties, broken by the id
            C.RANK: None if rng.random() < 0.3 else (rng.choice("aéz日") if strings else rng.randrange(4)),
            C.PRIORITY: rng.randrange(3),
        }
        for i in range(n)
    ]
    order = pa.table(
        {
            C.DOC_ID: pa.array([r[C.DOC_ID] for r in rows]),
            C.LENGTH: pa.array([r[C.LENGTH] for r in rows], pa.int32()),
            C.RANK: pa.array([r[C.RANK] for r in rows], pa.string() if strings else pa.int64()),
            C.PRIORITY: pa.array([r[C.PRIORITY] for r in rows], pa.int32()),
        }
    )
    got = exact_reps(
        [r["hi"] for r in rows], [r["lo"] for r in rows], order.select([k.column for k in keys]), keys
    )
    assert got.tolist() == _expected(rows, keys)


def test_rows_alone_represent_themselves() -> None:
    keys = [SortKey(C.DOC_ID, False)]
    for n in (0, 1, 3):
        got = exact_reps(np.arange(n), np.zeros(n), pa.table({C.DOC_ID: pa.array(range(n))}), keys)
        assert got.tolist() == list(range(n))
    with pytest.raises(ValueError, match="2 hashes, 1 low halves"):
        exact_reps([1, 2], [1], pa.table({C.DOC_ID: [1, 2]}), keys)
