"""Spark side of `neardup evaluate`: a finished output against labels, or a sample of its
removed documents scored again by exact Jaccard against their kept documents.

Pairs are counted, never listed: the pair counts come from sums of C(size, 2) over the
groups of the contingency table (kernels/metrics.py), so labels of any size work.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.errors import InputDataError
from neardup.kernels.metrics import PairCounts
from neardup.runtime.fs import FileSystem
from neardup.stages.components import connected_components
from neardup.stages.read import CORRUPT, detect_format, documents, read_input
from neardup.stages.sign import sign_params
from neardup.stages.verify import verify_pairs

_TRUE = "_true"  # a document's true cluster, as a string
_REMOVED = (C.STATUS_EXACT, C.STATUS_NEAR)


def predicted(spark: SparkSession, output: str) -> DataFrame:
    """clusters/ without the rejected rows: (id, cluster_id, status)."""
    clusters = spark.read.parquet(f"{output.rstrip('/')}/clusters")
    return clusters.filter(F.col(C.STATUS) != C.STATUS_REJECTED).select(C.ID, C.CLUSTER_ID, C.STATUS)


def read_labels(spark: SparkSession, path: str, id_type: Any) -> tuple[str, DataFrame]:
    """Labels as ("clusters", (id, _true)) or ("pairs", (src, dst) with src < dst, distinct)."""
    fs = FileSystem.for_path(spark, path)
    if not fs.exists(path):
        raise InputDataError(f"labels {path} do not exist")
    fmt = detect_format(path, fs)
    if fmt not in ("parquet", "jsonl"):
        raise InputDataError(f"labels {path} must be Parquet or JSON Lines, not {fmt}")
    df = spark.read.parquet(path) if fmt == "parquet" else spark.read.json(path)
    cols = set(df.columns)
    if {"id", "cluster"} <= cols:
        return "clusters", df.select(
            F.col("id").cast(id_type).alias(C.ID), F.col("cluster").cast("string").alias(_TRUE)
        ).filter(F.col(C.ID).isNotNull() & F.col(_TRUE).isNotNull())
    if {"id_a", "id_b"} <= cols:
        a, b = F.col("id_a").cast(id_type), F.col("id_b").cast(id_type)
        pairs = df.select(F.least(a, b).alias(C.SRC), F.greatest(a, b).alias(C.DST))
        return "pairs", pairs.filter(
            F.col(C.SRC).isNotNull() & F.col(C.DST).isNotNull() & (F.col(C.SRC) != F.col(C.DST))
        ).distinct()
    raise InputDataError(
        f"labels {path} need columns id and cluster (a cluster id per document) or id_a and "
        f"id_b (duplicate pairs); they have {', '.join(sorted(cols))}"
    )


def _sum_pairs(df: DataFrame, *keys: str) -> int:
    """sum over the groups of `keys` of C(size, 2)."""
    sizes = df.groupBy(*keys).count()
    row = sizes.agg(F.sum(F.col("count") * (F.col("count") - 1) / 2).cast("decimal(38,0)").alias("p")).first()
    return int(row["p"] or 0) if row is not None else 0


def _with_truth(pred: DataFrame, truth: DataFrame) -> DataFrame:
    """pred + _true: each document's true cluster; a document the labels leave out is
    alone in its own."""
    return pred.join(truth, C.ID, "left").withColumn(
        _TRUE, F.coalesce(F.col(_TRUE), F.concat(F.lit("\u0000"), F.col(C.ID).cast("string")))
    )


def _removal(joined: DataFrame) -> tuple[int, int]:
    """(removed documents, those whose kept document is in their true cluster)."""
    kept_truth = joined.select(F.col(C.ID).alias(C.CLUSTER_ID), F.col(_TRUE).alias("_kept_true"))
    removed = joined.filter(F.col(C.STATUS).isin(*_REMOVED)).join(kept_truth, C.CLUSTER_ID)
    row = removed.agg(
        F.count(F.lit(1)).alias("n"), F.sum((F.col(_TRUE) == F.col("_kept_true")).cast("long")).alias("ok")
    ).first()
    assert row is not None
    return int(row["n"]), int(row["ok"] or 0)


def labeled_counts(
    pred: DataFrame, kind: str, labels: DataFrame, checkpoint_dir: str | None
) -> tuple[PairCounts, PairCounts, tuple[int, int], int]:
    """-> pair counts for precision/recall/F1, pair counts over partitions for the
    adjusted Rand index (the same unless labels are pairs: then their connected
    components), (removed, correctly removed), and label ids not in the output."""
    n = pred.count()
    all_pairs = n * (n - 1) // 2
    predicted_pairs = _sum_pairs(pred, C.CLUSTER_ID)
    ids = pred.select(C.ID)
    if kind == "clusters":
        joined = _with_truth(pred, labels)
        counts = PairCounts(
            _sum_pairs(joined, C.CLUSTER_ID, _TRUE), predicted_pairs, _sum_pairs(joined, _TRUE), all_pairs
        )
        unknown = labels.join(ids, C.ID, "left_anti").count()
        return counts, counts, _removal(joined), unknown
    # Pairs: precision and recall over the labeled pairs themselves.
    ends = ids.withColumnRenamed(C.ID, C.SRC)
    inside = labels.join(ends, C.SRC).join(ids.withColumnRenamed(C.ID, C.DST), C.DST)
    unknown = labels.count() - inside.count()
    cluster_of = pred.select(C.ID, C.CLUSTER_ID)
    together = (
        inside.join(cluster_of.withColumnRenamed(C.ID, C.SRC).withColumnRenamed(C.CLUSTER_ID, "_ca"), C.SRC)
        .join(cluster_of.withColumnRenamed(C.ID, C.DST).withColumnRenamed(C.CLUSTER_ID, "_cb"), C.DST)
        .filter(F.col("_ca") == F.col("_cb"))
        .count()
    )
    pair_counts = PairCounts(together, predicted_pairs, inside.count(), all_pairs)
    # The Rand index needs a partition: the labeled pairs' connected components.
    components, _ = connected_components(inside, backend="builtin", checkpoint_dir=checkpoint_dir)
    truth = components.select(F.col(C.DOC_ID).alias(C.ID), F.col(C.COMPONENT).cast("string").alias(_TRUE))
    joined = _with_truth(pred, truth)
    partition_counts = PairCounts(
        _sum_pairs(joined, C.CLUSTER_ID, _TRUE), predicted_pairs, _sum_pairs(joined, _TRUE), all_pairs
    )
    removed = pred.filter(F.col(C.STATUS).isin(*_REMOVED)).select(
        F.least(C.ID, C.CLUSTER_ID).alias(C.SRC), F.greatest(C.ID, C.CLUSTER_ID).alias(C.DST)
    )
    n_removed = removed.count()
    ok = removed.join(inside, [C.SRC, C.DST]).count()
    return pair_counts, partition_counts, (n_removed, ok), unknown


def sampled_similarities(
    spark: SparkSession, pred: DataFrame, cfg: Config, input_path: str, sample: int, seed: int
) -> tuple[list[float], int]:
    """Exact Jaccard of up to `sample` removed documents (a seeded hash of the id picks
    them: the same ones every time) against their kept documents, read again from the
    input; and how many documents were removed in all."""
    removed = pred.filter(F.col(C.STATUS).isin(*_REMOVED))
    total = removed.count()
    picked = removed.orderBy(F.xxhash64(F.col(C.ID).cast("string"), F.lit(seed)), C.ID).limit(sample)
    pairs = picked.select(
        F.least(C.ID, C.CLUSTER_ID).alias(C.SRC), F.greatest(C.ID, C.CLUSTER_ID).alias(C.DST)
    ).distinct()
    inp = read_input(spark, input_path, cfg)
    source = inp.df.filter(F.col(CORRUPT).isNull()).drop(CORRUPT) if CORRUPT in inp.df.columns else inp.df
    scored = verify_pairs(pairs, pairs, documents(source, cfg), sign_params(cfg), "exact", 0.0, True)
    by_pair = {(r[C.SRC], r[C.DST]): float(r[C.SIMILARITY]) for r in scored.collect()}
    rows = picked.select(C.ID, C.CLUSTER_ID).collect()
    keys = [(min(r[C.ID], r[C.CLUSTER_ID]), max(r[C.ID], r[C.CLUSTER_ID])) for r in rows]
    missing = [k for k in keys if k not in by_pair]
    if missing:
        raise InputDataError(
            f"{len(missing)} removed documents or their kept documents are not in the input "
            f"{input_path} any more (e.g. ids {missing[0][0]!r}, {missing[0][1]!r}); was it changed?"
        )
    return [by_pair[k] for k in keys], total
