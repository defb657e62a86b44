"""The survivor policy's order on the driver (exact groups' representatives, components'
survivors, the guard's ranking), against sorting in plain Python."""

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
from neardup.kernels.policy_order import HeldOrder


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


KEYS = pytest.mark.parametrize(
    "keys",
    [
        [SortKey(C.LENGTH, True), SortKey(C.DOC_ID, False)],
        [SortKey(C.RANK, False), SortKey(C.DOC_ID, False)],
        [SortKey(C.PRIORITY, False), SortKey(C.RANK, True), SortKey(C.DOC_ID, False)],
    ],
    ids=["longest", "earliest", "priority-then-quality"],
)


def _rows(seed: int, n: int = 600) -> tuple[list[dict[str, Any]], pa.Table]:
    """Rows with ties and nulls; seed 2: string ids and ranks, with bytes that order unlike
    code points' UTF-16."""
    rng = random.Random(seed)
    strings = seed == 2
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
    return rows, order


@pytest.mark.parametrize("seed", [1, 2, 3])
@KEYS
def test_each_group_is_represented_by_its_best_row(seed: int, keys: list[SortKey]) -> None:
    rows, order = _rows(seed)
    got = exact_reps(
        [r["hi"] for r in rows], [r["lo"] for r in rows], order.select([k.column for k in keys]), keys
    )
    assert got.tolist() == _expected(rows, keys)


@pytest.mark.parametrize("seed", [1, 2])
@KEYS
def test_held_keys_rank_and_choose_as_a_sort_of_the_rows(seed: int, keys: list[SortKey]) -> None:
    """A held subset of the rows looked up by id: their order, and each group's best (a
    survivor per component), against Python's sort of the rows."""
    rows, order = _rows(seed)
    held = HeldOrder(order.take(pa.array(range(0, len(rows), 2))), keys)
    rng = random.Random(seed)
    asked = rng.sample(rows[::2], 200)
    ids = np.array([r[C.DOC_ID] for r in asked], dtype=object if seed == 2 else np.int64)
    by = functools.cmp_to_key(lambda a, b: _compare(a, b, keys))
    assert held.best_first(ids).tolist() == [r[C.DOC_ID] for r in sorted(asked, key=by)]
    groups = [rng.randrange(30) for _ in asked]
    best = {
        g: min((r for r, h in zip(asked, groups, strict=True) if h == g), key=by)[C.DOC_ID]
        for g in set(groups)
    }
    assert held.best_of_groups(ids, groups).tolist() == [best[g] for g in groups]
    with pytest.raises(ValueError, match="1 of 2 ids not held"):
        held.rows(np.array([ids[0], rows[1][C.DOC_ID]], dtype=ids.dtype))
    # Nothing held: every id asked for is missing (not an index error).
    with pytest.raises(ValueError, match="2 of 2 ids not held"):
        HeldOrder(order.slice(0, 0), keys).rows(ids[:2])


def test_rows_alone_represent_themselves() -> None:
    keys = [SortKey(C.DOC_ID, False)]
    for n in (0, 1, 3):
        got = exact_reps(np.arange(n), np.zeros(n), pa.table({C.DOC_ID: pa.array(range(n))}), keys)
        assert got.tolist() == list(range(n))
    with pytest.raises(ValueError, match="2 hashes, 1 low halves"):
        exact_reps([1, 2], [1], pa.table({C.DOC_ID: [1, 2]}), keys)
