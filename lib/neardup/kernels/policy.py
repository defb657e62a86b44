"""Survivor policy as a sort order: which document of a cluster is kept.

Pure: the order is a list of (column, descending) keys; the Spark stages turn it
into the fields of one struct whose minimum is the survivor (stages/survivor_order.py).
Every order ends with the smallest id, so it is total and
the survivor never depends on partitioning or on the order rows arrive in.
Nulls in survivor.column always rank last (never kept over a document with a value).

`priority` ranks documents by where their survivor.priority_column value stands in
the survivor.priority list (`_priority`: the value's position, the list's length for
values not in it and for nulls, so those rank last and equal), then by the policy
named in survivor.then, then by the smallest id.
"""

from __future__ import annotations

from typing import NamedTuple

from neardup import columns as C

PRIORITY = "priority"
# The policies that can break priority's ties (survivor.then): every policy but priority.
THEN_POLICIES = ("longest", "earliest", "quality")
POLICIES = (*THEN_POLICIES, PRIORITY)


class SortKey(NamedTuple):
    column: str
    descending: bool


def survivor_order(
    policy: str, has_column: bool, then: str = "longest", prefer_index: bool = False
) -> list[SortKey]:
    """Best first. longest: most characters; earliest: smallest survivor.column
    (or smallest id without one); quality: largest survivor.column; priority: smallest
    `_priority`, then the order of `then` (any policy but priority). `prefer_index`
    (dedup --against): indexed documents before any of the batch, whatever the policy."""
    # An indexed document is never removed, so it leads; it has no policy column (nulls rank
    # last), so indexed documents order among themselves by id.
    first = [SortKey(C.FROM_INDEX, True)] if prefer_index else []
    if policy == PRIORITY:
        if then not in THEN_POLICIES:
            raise ValueError(f"survivor.then must be one of {', '.join(THEN_POLICIES)}, not {then!r}")
        return [*first, SortKey(C.PRIORITY, False), *survivor_order(then, has_column)]
    if policy == "longest":
        keys = [SortKey(C.LENGTH, True)]
    elif policy == "earliest":
        keys = [SortKey(C.RANK, False)] if has_column else []
    elif policy == "quality":
        keys = [SortKey(C.RANK, True)]
    else:
        raise ValueError(f"unknown survivor policy {policy!r}")
    return [*first, *keys, SortKey(C.DOC_ID, False)]


def carried_columns(policy: str) -> tuple[str, ...]:
    """The policy's columns that travel with every document from the input to the
    survivor choice (read -> sign -> exact groups -> survivors), besides the id and
    `_len` (measured while signing): survivor.column's value always (earliest and
    quality read it, as policies or as priority's tie-breaker), `_priority` only under
    priority (no other policy pays for the column)."""
    return (C.RANK, C.PRIORITY) if policy == PRIORITY else (C.RANK,)
