"""The job's own end-of-run checks, run on the written outputs before publication.

They read back what was written (not the in-memory plan), so a lost or doubled
write is caught too. Any failure raises InvariantError and nothing is published. The
rules themselves are kernels/output_rules.py's, on the figures summed here.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.errors import InvariantError
from neardup.kernels.output_rules import OutputFigures, output_counts, output_problems

_KEY = "_key"
_ROW = "_row"  # a clusters/ row, counted under its id
_SURVIVOR = "_survivor"  # a clusters/ row flagged kept: its id is a cluster_id others may name
_NEED = "_need"  # a clusters/ row (not rejected) that names a cluster_id, counted under it
_KEPT_ROW = "_kept_row"  # a row of kept/
_REJECTED_ROW = "_rejected_row"  # a row of rejected/
_STATUSES = (C.STATUS_UNIQUE, C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR, C.STATUS_REJECTED)


def check_outputs(
    n_input: int,
    clusters: DataFrame,
    kept: DataFrame,
    rejected: DataFrame,
    malformed: int = 0,
    guard_threshold: float | None = None,
    index_ids: DataFrame | None = None,
) -> dict[str, int]:
    """Every input id exactly once in clusters/; kept + removed + rejected = input;
    kept/ and rejected/ hold exactly the rows clusters/ says; every cluster_id is a
    kept document; with `guard_threshold`, every near duplicate's similarity to its kept
    document is at least that. `malformed` lines (no id: in rejected/ only) count as
    rejected input. With `index_ids` (_id: every indexed document, dedup --against), a
    cluster_id may instead be an indexed document: then it is the row's matched_index_id,
    the row is a removed one, and that id is in the index. Returns the status counts.

    One query, whatever the size: the rows of the three outputs are grouped by a key (a
    clusters/ row under its id, and once more under its cluster_id; kept/ and rejected/
    rows under null, where they are only counted), then summed. Per id that gives how
    often it occurs and whether it is a kept document that the rows naming it may point
    to; the sums give every figure below.
    """
    id_type = clusters.schema[C.ID].dataType
    status, zero, one = F.col(C.STATUS), F.lit(0).cast("long"), F.lit(1).cast("long")
    below_guard = (status == C.STATUS_NEAR) & ~F.coalesce(
        F.col(C.SIMILARITY) >= (guard_threshold or 0.0), F.lit(False)
    )
    flags = [(_KEPT_ROW, zero), (_REJECTED_ROW, zero)]
    by_id = clusters.select(
        F.col(C.ID).alias(_KEY),
        one.alias(_ROW),
        F.col(C.KEPT).cast("long").alias(_SURVIVOR),
        zero.alias(_NEED),
        *[(status == s).cast("long").alias(s) for s in _STATUSES],
        F.col(C.KEPT).cast("long").alias("kept_flags"),
        below_guard.cast("long").alias("below_guard"),
        *[v.alias(k) for k, v in flags],
    )
    nothing = [zero.alias(c) for c in by_id.columns if c not in (_KEY, _NEED, _KEPT_ROW, _REJECTED_ROW)]

    def counted(frame: DataFrame, key: Any, need: Any, flag: str | None) -> DataFrame:
        marks = [(one if k == flag else zero).alias(k) for k, _ in flags]
        return frame.select(key.cast(id_type).alias(_KEY), need.alias(_NEED), *nothing, *marks).select(
            *by_id.columns
        )

    placed = clusters.filter(status != C.STATUS_REJECTED)
    if index_ids is not None:
        # Removed in favour of an indexed document: _check_matched checks those.
        placed = placed.filter(F.col(C.MATCHED_INDEX_ID).isNull())
    names = counted(placed, F.col(C.CLUSTER_ID), one, None)
    rows = (
        by_id.unionByName(names)
        .unionByName(counted(kept, F.lit(None), zero, _KEPT_ROW))
        .unionByName(counted(rejected, F.lit(None), zero, _REJECTED_ROW))
    )
    summed = [c for c in by_id.columns if c != _KEY]
    per_key = rows.groupBy(_KEY).agg(*[F.sum(c).alias(c) for c in summed])
    is_null = F.col(_KEY).isNull()
    stats = per_key.agg(
        F.sum(_ROW).alias("rows"),
        F.sum(F.when(~is_null & (F.col(_ROW) > 0), 1).otherwise(0)).alias("ids"),
        F.sum(F.when(is_null, F.col(_ROW)).otherwise(0)).alias("null_ids"),
        # A null cluster_id names no document; an id that no kept row has neither.
        F.sum(F.when(is_null | (F.coalesce(F.col(_SURVIVOR), zero) == 0), F.col(_NEED)).otherwise(0)).alias(
            "orphans"
        ),
        *[F.sum(c).alias(c) for c in summed if c not in (_ROW, _SURVIVOR, _NEED)],
    ).first()
    assert stats is not None
    s = {k: int(stats[k] or 0) for k in stats.asDict()}
    figures = OutputFigures(
        input_rows=n_input,
        malformed=malformed,
        rows=s["rows"],
        ids=s["ids"],
        null_ids=s["null_ids"],
        orphans=s["orphans"],
        unique=s[C.STATUS_UNIQUE],
        kept=s[C.STATUS_KEPT],
        exact=s[C.STATUS_EXACT],
        near=s[C.STATUS_NEAR],
        rejected=s[C.STATUS_REJECTED],
        kept_flags=s["kept_flags"],
        below_guard=s["below_guard"],
        kept_rows=s[_KEPT_ROW],
        rejected_rows=s[_REJECTED_ROW],
    )
    problems = output_problems(figures, guard_threshold)
    matched = 0
    if index_ids is not None:
        matched, matched_problems = _check_matched(clusters, index_ids)
        problems += matched_problems
    if problems:
        raise InvariantError("output check failed: " + "; ".join(problems))
    counts = output_counts(figures)
    return {**counts, "matched_index": matched} if index_ids is not None else counts


def _check_matched(clusters: DataFrame, index_ids: DataFrame) -> tuple[int, list[str]]:
    """Rows removed in favour of an indexed document: how many, and what is wrong with them."""
    matched = clusters.filter(F.col(C.MATCHED_INDEX_ID).isNotNull())
    row = matched.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(
            (
                ~F.col(C.STATUS).isin(C.STATUS_EXACT, C.STATUS_NEAR)
                | ~F.coalesce(F.col(C.CLUSTER_ID) == F.col(C.MATCHED_INDEX_ID), F.lit(False))
            ).cast("long")
        ).alias("bad"),
    ).first()
    assert row is not None
    n, problems = int(row["n"]), []
    if row["bad"]:
        problems.append(f"{row['bad']} rows with a matched_index_id are not removed in its favour")
    wanted = matched.select(F.col(C.MATCHED_INDEX_ID).alias(C.DOC_ID)).distinct()
    missing = wanted.join(index_ids, C.DOC_ID, "left_anti").count()
    if missing:
        problems.append(f"{missing} matched_index_id values are not in the index")
    return n, problems
