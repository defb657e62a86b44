"""Stage: write clusters/, kept/ and rejected/ under the staging directory."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from neardup import columns as C
from neardup.config import Config


def write_outputs(
    source: DataFrame,
    cfg: Config,
    assigned: DataFrame,
    rejected: DataFrame,
    staged: Mapping[str, str],
    options: Mapping[str, str],
    broadcast_dropped: bool,
    broadcast_rejected: bool,
    malformed: DataFrame | None = None,
    matched: DataFrame | None = None,
    broadcast_matched: bool = True,
    any_rejected: bool = True,
    sorted_by_id: bool = False,
) -> dict[str, StructType]:
    """Write the three outputs to `staged[name]` with the Parquet writer `options`;
    returns their schemas (name -> schema), so they are read back without a job.

    assigned (_id, _kept_id, status, ...): every signed document and exact copy;
    rejected (_id, reason); source: the input rows, every column as read.

    - clusters/: one row per input row, sorted by id: id, cluster_id, kept, status,
      similarity (a removed document's Jaccard to its kept document), reason; with `matched`
      (_id: the indexed documents a --against run may keep in the batch's place, broadcast
      when `broadcast_matched`), also matched_index_id: the cluster_id when it is one of
      them, else null.
    - kept/: the input rows of kept documents, columns unchanged. The removed and rejected
      ids are taken out with an anti join; broadcast (`broadcast_dropped`) when few, so the
      texts are filtered where they are read instead of being shuffled.
    - rejected/: the input rows that could not be processed, plus `reason` (named
      `neardup_reason` if the input already has a `reason` column); with `malformed`
      (_file, _line, _raw), also one row per malformed line: the input columns null, the
      reason naming its file and line, and the line's bytes in `malformed_line`.
      `any_rejected` False (the caller counted no rejected rows) writes it empty without
      reading the input.

    `sorted_by_id`: `assigned`'s partitions hold its rows in id order (made on the driver);
    with no rejected rows, clusters/ is then written as they are, without a sort.
    """
    id_type = next(f.dataType for f in source.schema.fields if f.name == cfg.input.id_col)
    matched_cols, rejected_cols = [], []
    if matched is not None:
        flags = matched.select(F.col(C.DOC_ID).alias(C.KEPT_ID), F.col(C.DOC_ID).alias(C.MATCHED_INDEX_ID))
        assigned = assigned.join(F.broadcast(flags) if broadcast_matched else flags, C.KEPT_ID, "left")
        matched_cols = [F.col(C.MATCHED_INDEX_ID)]
        rejected_cols = [F.lit(None).cast(id_type).alias(C.MATCHED_INDEX_ID)]
    clusters = assigned.select(
        F.col(C.DOC_ID).alias(C.ID),
        F.col(C.KEPT_ID).alias(C.CLUSTER_ID),
        (F.col(C.DOC_ID) == F.col(C.KEPT_ID)).alias(C.KEPT),
        F.col(C.STATUS),
        F.col(C.SIMILARITY),
        F.lit(None).cast("string").alias(C.REASON),
        *matched_cols,
    )
    clusters = clusters.unionByName(
        rejected.select(
            F.col(C.DOC_ID).alias(C.ID),
            F.lit(None).cast(id_type).alias(C.CLUSTER_ID),
            F.lit(False).alias(C.KEPT),
            F.lit(C.STATUS_REJECTED).alias(C.STATUS),
            F.lit(None).cast("double").alias(C.SIMILARITY),
            F.col(C.REASON),
            *rejected_cols,
        )
    )
    # In order already: the rejected rows' partitions after the assigned ones are empty.
    in_order = sorted_by_id and not any_rejected and matched is None
    ordered = clusters if in_order else clusters.orderBy(C.ID)
    ordered.write.mode("overwrite").options(**options).parquet(staged["clusters"])
    schemas = {"clusters": clusters.schema}

    id_col = cfg.input.id_col
    dropped = (
        assigned.filter(F.col(C.DOC_ID) != F.col(C.KEPT_ID))
        .select(F.col(C.DOC_ID).alias("_drop_id"))
        .unionByName(rejected.select(F.col(C.DOC_ID).alias("_drop_id")))
    )
    if broadcast_dropped:
        dropped = F.broadcast(dropped)
    kept = source.join(dropped, F.col(id_col) == F.col("_drop_id"), "left_anti")
    kept.write.mode("overwrite").options(**options).parquet(staged["kept"])
    schemas["kept"] = kept.schema

    bad = rejected_rows(source, cfg, rejected, broadcast_rejected, malformed, any_rejected)
    bad.write.mode("overwrite").options(**options).parquet(staged["rejected"])
    schemas["rejected"] = bad.schema
    return schemas


def rejected_rows(
    source: DataFrame,
    cfg: Config,
    rejected: DataFrame,
    broadcast: bool,
    malformed: DataFrame | None = None,
    any_rejected: bool = True,
) -> DataFrame:
    """rejected/: the input rows of `rejected` (_id, reason), every input column plus
    `reason` (`neardup_reason` if the input already has a `reason` column; the reasons are
    broadcast with `broadcast`), and with `malformed` (_file, _line, _raw) one row per
    malformed line: the input columns null, the reason naming its file and line, and the
    line's bytes in `malformed_line`. `any_rejected` False (the caller counted no rejected
    rows): no input row is read to find none."""
    id_col = cfg.input.id_col
    reason_name = "neardup_reason" if C.REASON in source.columns else C.REASON
    reasons = rejected.select(F.col(C.DOC_ID).alias("_rej_id"), F.col(C.REASON).alias(reason_name))
    if not any_rejected:
        # Nothing rejected (the usual case): the same columns with no rows, and the input is
        # not read again to find none (Spark plans a limit of 0 as an empty relation).
        bad = source.limit(0).withColumn(reason_name, F.lit(None).cast("string"))
    else:
        bad = source.join(F.broadcast(reasons) if broadcast else reasons, F.col(id_col) == F.col("_rej_id"))
        bad = bad.drop("_rej_id")
    if malformed is not None:
        where = F.concat(
            # "malformed JSON line (" or "malformed CSV record ("
            F.lit("malformed "),
            F.col("_kind") if "_kind" in malformed.columns else F.lit("JSON line"),
            F.lit(" ("),
            F.col("_file"),
            F.when(
                F.col("_line").isNotNull(), F.concat(F.lit(" line "), F.col("_line").cast("string"))
            ).otherwise(F.lit("")),
            F.lit(")"),
        )
        lines = malformed.select(
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in source.schema.fields],
            where.alias(reason_name),
            # Bytes, exactly as read: the line may not even be valid UTF-8.
            F.col("_raw").cast("binary").alias("malformed_line"),
        )
        bad = bad.withColumn("malformed_line", F.lit(None).cast("binary")).unionByName(lines)
    return bad
