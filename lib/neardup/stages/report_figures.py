"""Stage: the figures report.html shows beyond report.json, by Spark aggregations.

Reads the staged clusters/, the verified edges and the input; only small results reach
the driver: bin counts, one row per distinct cluster size, the rows of the largest and
the sampled clusters, and their texts cut to `TEXT_CHARS` characters in Spark (a 50 MB
document sends its first few KB). Work: a scan of clusters/ and a shuffle of its rows in
clusters of duplicates only (sizes), an aggregation of the edges, and one filtered scan of
the input for at most LARGEST + sample_clusters x (MEMBERS_PER_SAMPLE + 1) texts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.report.summary import (
    BIN_SLACK,
    BINS,
    LARGEST,
    MEMBERS_PER_SAMPLE,
    TEXT_CHARS,
    Cluster,
    Doc,
    Histogram,
    Summary,
)

_SIZE = "_size"
_BIN = "_bin"
_WHICH = "_which"


def similarity_histogram(df: DataFrame, column: str) -> Histogram:
    """Counts of `column` per bin (summary.bin_of, as a Spark expression); nulls counted apart."""
    return similarity_histograms({"": df}, column)[""]


def similarity_histograms(frames: Mapping[str, DataFrame], column: str) -> dict[str, Histogram]:
    """`similarity_histogram` of each frame, in one query (one scan of each, one small shuffle)."""
    value = F.col(column)
    # when(): Spark's least() skips nulls, so a null would land in the last bin.
    binned = F.when(
        value.isNotNull(), F.least(F.floor(value * BINS + BIN_SLACK), F.lit(BINS - 1)).cast("int")
    ).alias(_BIN)
    parts = [df.select(F.lit(name).alias(_WHICH), binned) for name, df in frames.items()]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    rows = union.groupBy(_WHICH, _BIN).count().collect()
    out = {}
    for name in frames:
        mine = [r for r in rows if r[_WHICH] == name]
        counts = {int(r[_BIN]): int(r["count"]) for r in mine if r[_BIN] is not None}
        missing = sum(int(r["count"]) for r in mine if r[_BIN] is None)
        out[name] = Histogram(counts, missing)
    return out


def cluster_sizes(clusters: DataFrame) -> DataFrame:
    """(cluster_id, _size) of every cluster with duplicates: only their rows are shuffled."""
    members = clusters.filter(F.col(C.STATUS).isin(C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR))
    # A cluster kept by an indexed document (dedup --against) has no row of its kept one.
    without_kept = 1 - F.max((F.col(C.STATUS) == C.STATUS_KEPT).cast("int"))
    return members.groupBy(C.CLUSTER_ID).agg((F.count(F.lit(1)) + without_kept).alias(_SIZE))


def sample_order(seed: int) -> list[Any]:
    """The sample's order: a seeded 64-bit hash of the kept id (Spark's xxhash64, the same
    on every executor and run), then the id; so the choice depends on the data and
    report.seed only, never on partitioning."""
    return [F.xxhash64(F.lit(seed).cast("long"), F.col(C.CLUSTER_ID)), F.col(C.CLUSTER_ID)]


def _texts(source: DataFrame, id_col: str, text_col: str, ids: list[Any]) -> dict[Any, tuple[str, int]]:
    """id -> (the first TEXT_CHARS characters, length in characters), cut in Spark."""
    if not ids:
        return {}
    rows = (
        source.filter(F.col(id_col).isin(ids))
        .select(
            F.col(id_col).alias(C.DOC_ID),
            F.substring(F.col(text_col), 1, TEXT_CHARS).alias(C.TEXT),
            F.length(F.col(text_col)).alias(C.LENGTH),
        )
        .collect()
    )
    return {r[C.DOC_ID]: (r[C.TEXT], int(r[C.LENGTH] or 0)) for r in rows}


def gather(
    clusters: DataFrame,
    edges: DataFrame,
    source: DataFrame,
    id_col: str,
    text_col: str,
    sample_clusters: int,
    seed: int,
    statuses: Mapping[str, int] | None = None,
) -> Summary:
    """clusters: the written clusters/ (with the guard's `similarity` column if it ran);
    edges (src, dst, similarity); source: the input rows (id_col, text_col, ...);
    statuses: clusters/ rows per status when the caller counted them already (the job's
    check did), else counted here."""
    if statuses is None:
        statuses = {str(r[C.STATUS]): int(r["count"]) for r in clusters.groupBy(C.STATUS).count().collect()}
    removed = clusters.filter(~F.col(C.KEPT) & F.col(C.CLUSTER_ID).isNotNull())
    has_similarity = C.SIMILARITY in clusters.columns
    histograms = similarity_histograms(
        {"edges": edges, **({"removed": removed} if has_similarity else {})}, C.SIMILARITY
    )
    edge_similarity = histograms["edges"]
    removed_similarity = histograms.get("removed")

    sizes_df = cluster_sizes(clusters).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        by_size = sizes_df.groupBy(_SIZE).count().collect()
        sizes = {int(r[_SIZE]): int(r["count"]) for r in by_size}
        if statuses.get(C.STATUS_UNIQUE):
            sizes[1] = statuses[C.STATUS_UNIQUE]
        top = sizes_df.orderBy(F.desc(_SIZE), F.asc(C.CLUSTER_ID)).limit(LARGEST).collect()
        picked = (
            sizes_df.orderBy(*sample_order(seed)).limit(sample_clusters).collect() if sample_clusters else []
        )
    finally:
        sizes_df.unpersist()

    members: dict[Any, list[Any]] = {r[C.CLUSTER_ID]: [] for r in picked}
    if members:
        # Near duplicates first (they are the ones with differences to show), then by id.
        order = Window.partitionBy(C.CLUSTER_ID).orderBy(F.col(C.STATUS) == C.STATUS_EXACT, F.col(C.ID))
        similarity = F.col(C.SIMILARITY) if has_similarity else F.lit(None).cast("double")
        rows = (
            removed.filter(F.col(C.CLUSTER_ID).isin(list(members)))
            .select(
                C.ID,
                C.CLUSTER_ID,
                C.STATUS,
                similarity.alias(C.SIMILARITY),
                F.row_number().over(order).alias("_n"),
            )
            .filter(F.col("_n") <= MEMBERS_PER_SAMPLE)
            .collect()
        )
        # At most MEMBERS_PER_SAMPLE rows per cluster: put in order here, not by a shuffle.
        for r in sorted(rows, key=lambda r: r["_n"]):
            members[r[C.CLUSTER_ID]].append(r)

    wanted = [r[C.CLUSTER_ID] for r in top] + list(members) + [m[C.ID] for ms in members.values() for m in ms]
    texts = _texts(source, id_col, text_col, list(dict.fromkeys(wanted)))

    def doc(doc_id: Any, status: str, similarity: float | None = None) -> Doc:
        text, chars = texts.get(doc_id, (None, 0))
        return Doc(doc_id, status, text, chars, similarity)

    largest = [Cluster(doc(r[C.CLUSTER_ID], C.STATUS_KEPT), int(r[_SIZE])) for r in top]
    samples = [
        Cluster(
            doc(r[C.CLUSTER_ID], C.STATUS_KEPT),
            int(r[_SIZE]),
            [doc(m[C.ID], str(m[C.STATUS]), m[C.SIMILARITY]) for m in members[r[C.CLUSTER_ID]]],
        )
        for r in picked
    ]
    return Summary(dict(statuses), sizes, edge_similarity, removed_similarity, largest, samples)
