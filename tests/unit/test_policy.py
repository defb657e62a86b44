"""kernels/policy.py: each survivor policy's sort order, written out whole."""

from __future__ import annotations

import pytest

from neardup import columns as C
from neardup.kernels.policy import SortKey, carried_columns, survivor_order

ID = SortKey(C.DOC_ID, False)
PRIORITY = SortKey(C.PRIORITY, False)


@pytest.mark.parametrize(
    ("policy", "has_column", "then", "want"),
    [
        ("longest", False, "longest", [SortKey(C.LENGTH, True), ID]),
        ("earliest", True, "longest", [SortKey(C.RANK, False), ID]),
        ("earliest", False, "longest", [ID]),
        ("quality", True, "longest", [SortKey(C.RANK, True), ID]),
        # `then` is read only by priority.
        ("longest", False, "quality", [SortKey(C.LENGTH, True), ID]),
        ("priority", False, "longest", [PRIORITY, SortKey(C.LENGTH, True), ID]),
        ("priority", True, "earliest", [PRIORITY, SortKey(C.RANK, False), ID]),
        ("priority", False, "earliest", [PRIORITY, ID]),
        ("priority", True, "quality", [PRIORITY, SortKey(C.RANK, True), ID]),
    ],
)
def test_survivor_order(policy: str, has_column: bool, then: str, want: list[SortKey]) -> None:
    assert survivor_order(policy, has_column, then) == want


def test_priority_cannot_break_its_own_ties() -> None:
    with pytest.raises(ValueError, match=r"survivor\.then must be one of longest, earliest, quality"):
        survivor_order("priority", True, "priority")
    with pytest.raises(ValueError, match="unknown survivor policy 'random'"):
        survivor_order("random", True)


def test_only_priority_carries_its_column() -> None:
    assert carried_columns("priority") == (C.RANK, C.PRIORITY)
    assert [carried_columns(p) for p in ("longest", "earliest", "quality")] == [(C.RANK,)] * 3
