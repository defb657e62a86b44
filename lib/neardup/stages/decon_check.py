"""The end-of-run checks of `neardup decontaminate`, on the written outputs, before
anything is published (as stages/check.py does for dedup): they read back what was
written, so a lost or doubled write is caught too. Any failure raises InvariantError."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.errors import InvariantError
from neardup.kernels.contamination import NGRAM, REASON_NEAR, REASON_NGRAM, REASONS


def check_decontaminated(
    n_input: int,
    id_col: str,
    kept: DataFrame,
    removed: DataFrame,
    rejected: DataFrame,
    matches: DataFrame,
    threshold: float | None,
    malformed: int = 0,
) -> dict[str, int]:
    """Every input row is in exactly one of kept/, removed/ and rejected/ (each id once over
    the three; a malformed line, which has no id, in rejected/ only); the documents of
    matches/ are exactly those of removed/; every match has a known reason, a near-duplicate
    its similarity at or above `threshold`, an n-gram match its n-gram. Returns the counts."""
    tagged = [
        frame.select(F.col(id_col).alias("_cid"), F.lit(name).alias("_out"))
        for name, frame in (("kept", kept), ("removed", removed), ("rejected", rejected))
    ]
    ids = tagged[0].unionByName(tagged[1]).unionByName(tagged[2])
    s = ids.agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("_cid").alias("distinct"),
        F.sum(F.col("_cid").isNull().cast("long")).alias("null_ids"),
        *[
            F.sum((F.col("_out") == name).cast("long")).alias(name)
            for name in ("kept", "removed", "rejected")
        ],
    ).first()
    m = matches.agg(
        F.count(F.lit(1)).alias("matches"),
        F.sum((~F.col(C.REASON).isin(*REASONS)).cast("long")).alias("unknown"),
        F.sum(
            (
                (F.col(C.REASON) == REASON_NEAR)
                & ~F.coalesce(
                    F.col(C.SIMILARITY) >= (threshold if threshold is not None else 2.0), F.lit(False)
                )
            ).cast("long")
        ).alias("below"),
        F.sum(((F.col(C.REASON) == REASON_NGRAM) & F.col(NGRAM).isNull()).cast("long")).alias("no_ngram"),
    ).first()
    assert s is not None and m is not None
    c = {k: int(s[k] or 0) for k in ("rows", "distinct", "null_ids", "kept", "removed", "rejected")}
    problems = []
    if c["rows"] != n_input:
        problems.append(
            f"kept {c['kept']} + removed {c['removed']} + rejected {c['rejected']} != input {n_input}"
        )
    if c["distinct"] != n_input - malformed or c["null_ids"] != malformed:
        problems.append(
            f"{c['distinct']} distinct ids and {c['null_ids']} rows without one over kept/, removed/ and "
            f"rejected/ for {n_input - malformed} input rows with an id and {malformed} malformed lines"
        )
    matched = matches.select(F.col(C.ID).alias("_cid")).distinct()
    removed_ids = removed.select(F.col(id_col).alias("_cid"))
    unexplained = removed_ids.join(matched, "_cid", "left_anti").count()
    strays = matched.join(removed_ids, "_cid", "left_anti").count()
    if unexplained or strays:
        problems.append(
            f"{unexplained} removed documents have no match and {strays} matched ones are not removed"
        )
    if m["unknown"] or m["no_ngram"]:
        problems.append(
            f"{m['unknown']} matches have an unknown reason, {m['no_ngram']} n-gram matches no n-gram"
        )
    if m["below"]:
        what = f"below the threshold {threshold}" if threshold is not None else "with near-duplicates off"
        problems.append(f"{m['below']} near-duplicate matches {what}")
    if problems:
        raise InvariantError("output check failed: " + "; ".join(problems))
    return {
        "kept": c["kept"],
        "removed": c["removed"],
        "rejected": c["rejected"],
        "matches": int(m["matches"] or 0),
    }
