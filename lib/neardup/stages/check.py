"""The job's own end-of-run checks, run on the written outputs before publication.

They read back what was written (not the in-memory plan), so a lost or doubled
write is caught too. Any failure raises InvariantError and nothing is published.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.errors import InvariantError


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
    the row is a removed one, and that id is in the index. Returns the status counts."""
    stats = clusters.agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct(C.ID).alias("ids"),
        F.sum(F.col(C.ID).isNull().cast("long")).alias("null_ids"),
        *[
            F.sum((F.col(C.STATUS) == s).cast("long")).alias(s)
            for s in (C.STATUS_UNIQUE, C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR, C.STATUS_REJECTED)
        ],
        F.sum(F.col(C.KEPT).cast("long")).alias("kept_flags"),
        F.sum(
            (
                (F.col(C.STATUS) == C.STATUS_NEAR)
                & ~F.coalesce(F.col(C.SIMILARITY) >= (guard_threshold or 0.0), F.lit(False))
            ).cast("long")
        ).alias("below_guard"),
    ).first()
    assert stats is not None
    s = {k: int(stats[k] or 0) for k in stats.asDict()}
    kept_n = s[C.STATUS_UNIQUE] + s[C.STATUS_KEPT]
    removed = s[C.STATUS_EXACT] + s[C.STATUS_NEAR]
    problems = []
    if s["rows"] != n_input - malformed:
        problems.append(f"clusters/ has {s['rows']} rows for {n_input - malformed} input rows with an id")
    if s["ids"] != s["rows"] or s["null_ids"]:
        problems.append(f"clusters/ has {s['rows'] - s['ids']} repeated and {s['null_ids']} null ids")
    if kept_n + removed + s[C.STATUS_REJECTED] + malformed != n_input:
        problems.append(
            f"kept {kept_n} + removed {removed} + rejected {s[C.STATUS_REJECTED]} + malformed "
            f"{malformed} != input {n_input}"
        )
    if guard_threshold is not None and s["below_guard"]:
        problems.append(
            f"{s['below_guard']} near duplicates are below guard.threshold {guard_threshold} "
            "against their kept document"
        )
    if s["kept_flags"] != kept_n:
        problems.append(f"{s['kept_flags']} rows flagged kept but {kept_n} have a kept status")
    n_kept_rows, n_rejected_rows = kept.count(), rejected.count()
    if n_kept_rows != kept_n:
        problems.append(f"kept/ has {n_kept_rows} rows, clusters/ says {kept_n}")
    if n_rejected_rows != s[C.STATUS_REJECTED] + malformed:
        problems.append(
            f"rejected/ has {n_rejected_rows} rows, clusters/ says {s[C.STATUS_REJECTED]} "
            f"and {malformed} lines were malformed"
        )
    survivors = clusters.filter(F.col(C.KEPT)).select(F.col(C.ID).alias(C.CLUSTER_ID))
    placed = clusters.filter(F.col(C.STATUS) != C.STATUS_REJECTED)
    matched = 0
    if index_ids is not None:
        matched, matched_problems = _check_matched(clusters, index_ids)
        problems += matched_problems
        placed = placed.filter(F.col(C.MATCHED_INDEX_ID).isNull())
    orphans = placed.select(C.CLUSTER_ID).join(survivors, C.CLUSTER_ID, "left_anti").count()
    if orphans:
        problems.append(f"{orphans} rows point to a cluster_id that is not a kept document")
    if problems:
        raise InvariantError("output check failed: " + "; ".join(problems))
    counts = {
        "kept": kept_n,
        "unique": s[C.STATUS_UNIQUE],
        "exact_duplicates": s[C.STATUS_EXACT],
        "near_duplicates": s[C.STATUS_NEAR],
        "rejected": s[C.STATUS_REJECTED] + malformed,
    }
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
