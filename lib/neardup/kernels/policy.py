"""Survivor policy as a sort order: which document of a cluster is kept.

Pure: the order is a list of (column, descending) keys; the Spark stages turn it
into window orderings. Every order ends with the smallest id, so it is total and
the survivor never depends on partitioning or on the order rows arrive in.
Nulls in survivor.column always rank last (never kept over a document with a value).
"""

from __future__ import annotations

from typing import NamedTuple

from neardup import columns as C


class SortKey(NamedTuple):
    column: str
    descending: bool


def survivor_order(policy: str, has_column: bool, prefer_index: bool = False) -> list[SortKey]:
    """Best first. longest: most characters; earliest: smallest survivor.column
    (or smallest id without one); quality: largest survivor.column. `prefer_index`
    (dedup --against): indexed documents before any of the batch, whatever the policy."""
    if policy == "longest":
        keys = [SortKey(C.LENGTH, True)]
    elif policy == "earliest":
        keys = [SortKey(C.RANK, False)] if has_column else []
    elif policy == "quality":
        keys = [SortKey(C.RANK, True)]
    else:
        raise ValueError(f"unknown survivor policy {policy!r}")
    # An indexed document is never removed, so it leads; it has no policy column (nulls rank
    # last), so indexed documents order among themselves by id.
    first = [SortKey(C.FROM_INDEX, True)] if prefer_index else []
    return [*first, *keys, SortKey(C.DOC_ID, False)]
