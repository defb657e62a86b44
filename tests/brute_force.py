"""A finished run's clusters/ as the brute-force reference states it, and that reference:
each document's kept document, status and similarity (rounded: the job's sums and plain
Python's may differ in the last bits)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from neardup_testkit import reference

Result = dict[Any, tuple[Any, str, float | None]]


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 9)


def read_result(out: Path) -> Result:
    """clusters/ under `out`: id -> (cluster_id, status, similarity)."""
    rows = pq.read_table(out / "clusters", columns=["id", "cluster_id", "status", "similarity"]).to_pylist()
    return {r["id"]: (r["cluster_id"], r["status"], _round(r["similarity"])) for r in rows}


def brute_force(ids: Sequence[Any], texts: Sequence[str]) -> Result:
    """What `read_result` must read for these documents at the defaults (threshold 0.8,
    guard 0.7, survivor longest): neardup_testkit.reference's exact Jaccard of every
    similar pair and the guard round by round, in plain Python."""
    want = reference.guarded_clusters(ids, texts, 0.8, 0.7)
    status = reference.statuses(ids, texts, want)
    return {i: (k, status[i], _round(s)) for i, (k, s) in want.items()}
