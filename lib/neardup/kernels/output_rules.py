"""The rules the output check holds the written outputs to, on figures summed from them
(stages/check.py sums them in one query). Pure Python (and numpy or Arrow for `name_counts`
on the driver): the rules are tested on figures, without a JVM.

Every input id exactly once in clusters/; kept + removed + rejected = input; kept/ and
rejected/ hold exactly the rows clusters/ says; every cluster_id is a kept document; with
a guard threshold, every near duplicate's similarity to its kept document is at least that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class OutputFigures:
    """What the check counts in the written outputs."""

    input_rows: int  # every input row, malformed lines included
    malformed: int  # malformed lines (no id: in rejected/ only)
    rows: int  # clusters/ rows
    ids: int  # distinct non-null ids in clusters/
    null_ids: int  # clusters/ rows with a null id
    orphans: int  # rows whose cluster_id is not a kept document
    unique: int  # clusters/ rows by status
    kept: int  # (status kept: the kept document of a cluster of several)
    exact: int
    near: int
    rejected: int
    kept_flags: int  # clusters/ rows with kept = true
    below_guard: int  # near duplicates below the guard threshold to their kept document
    kept_rows: int  # rows of kept/
    rejected_rows: int  # rows of rejected/


def output_problems(f: OutputFigures, guard_threshold: float | None) -> list[str]:
    """Each rule the figures break, as a phrase for the one-line error; empty if none."""
    kept = f.unique + f.kept
    removed = f.exact + f.near
    problems = []
    if f.rows != f.input_rows - f.malformed:
        problems.append(f"clusters/ has {f.rows} rows for {f.input_rows - f.malformed} input rows with an id")
    if f.ids != f.rows or f.null_ids:
        problems.append(f"clusters/ has {f.rows - f.ids} repeated and {f.null_ids} null ids")
    if kept + removed + f.rejected + f.malformed != f.input_rows:
        problems.append(
            f"kept {kept} + removed {removed} + rejected {f.rejected} + malformed "
            f"{f.malformed} != input {f.input_rows}"
        )
    if guard_threshold is not None and f.below_guard:
        problems.append(
            f"{f.below_guard} near duplicates are below guard.threshold {guard_threshold} "
            "against their kept document"
        )
    if f.kept_flags != kept:
        problems.append(f"{f.kept_flags} rows flagged kept but {kept} have a kept status")
    if f.kept_rows != kept:
        problems.append(f"kept/ has {f.kept_rows} rows, clusters/ says {kept}")
    if f.rejected_rows != f.rejected + f.malformed:
        problems.append(
            f"rejected/ has {f.rejected_rows} rows, clusters/ says {f.rejected} "
            f"and {f.malformed} lines were malformed"
        )
    if f.orphans:
        problems.append(f"{f.orphans} rows point to a cluster_id that is not a kept document")
    return problems


def output_counts(f: OutputFigures) -> dict[str, int]:
    """report.json's counts from the figures (malformed lines count as rejected input)."""
    return {
        "kept": f.unique + f.kept,
        "unique": f.unique,
        "exact_duplicates": f.exact,
        "near_duplicates": f.near,
        "rejected": f.rejected + f.malformed,
    }


def name_counts(
    key: np.ndarray, is_row: np.ndarray, survivor: np.ndarray, need: np.ndarray
) -> tuple[int, int]:
    """(distinct ids, orphans) from the check's keys on the driver: `key` each clusters/ row's
    id (`is_row`, `survivor` where it is kept) or a cluster_id it names (`need`: a kept row
    must have it). Integer keys by numpy's sorts (0.05 s for a million rows, where Arrow's
    hash kernels took 0.3-0.6 s on their first call in a process); strings by Arrow's."""
    if key.dtype.kind in "iu":
        # Sorts, not np.unique (which took 0.25 s for a million ids, five times a sort).
        survivors = np.sort(key[is_row & survivor])
        needed = key[need]
        at = np.minimum(np.searchsorted(survivors, needed), max(len(survivors) - 1, 0))
        found = int((survivors[at] == needed).sum()) if len(survivors) else 0
        ids = np.sort(key[is_row])
        return int(len(ids) and 1 + np.count_nonzero(ids[1:] != ids[:-1])), len(needed) - found
    kept = pc.unique(pa.array(key[is_row & survivor]))
    needed_ = pa.array(key[need])
    found = pc.sum(pc.is_in(needed_, value_set=kept)).as_py() or 0
    ids = pc.count_distinct(pa.array(key[is_row])).as_py()
    return int(ids), len(needed_) - int(found)
