"""Stage: the figures report.html shows beyond report.json, by Spark aggregations.

Reads the staged clusters/, the verified edges and the input; only small results reach
the driver: bin counts, one row per distinct cluster size, the rows of the largest and
the sampled clusters, and their texts cut to `TEXT_CHARS` characters in Spark (a 50 MB
document sends its first few KB). Work: a scan of clusters/ and a shuffle of its rows in
clusters of duplicates only (sizes), an aggregation of the edges, and one filtered scan of
the input for at most LARGEST + sample_clusters x (MEMBERS_PER_SAMPLE + 1) texts. Where
the rows in clusters of duplicates are few enough to collect, they are, and the sizes, the
largest clusters and the sample come from them on the driver: three jobs in all, not
eleven.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.kernels import id_arrays
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
from neardup.stages.driver_frames import DRIVER_ID_TYPES, collect_arrays

_SIZE = "_size"
_BIN = "_bin"
_WHICH = "_which"
_HASH = "_hash"


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


@dataclass(frozen=True)
class _Clusters:
    """What the report takes from clusters/ beyond its statuses."""

    sizes: dict[int, int]  # clusters per size, in documents (unique ones not counted yet)
    top: list[tuple[Any, int]]  # (kept id, size) of the LARGEST largest clusters
    picked: list[tuple[Any, int]]  # the sample: (kept id, size)
    members: dict[Any, list[tuple[Any, str, float | None]]]  # a sample's first removed members
    removed_similarity: Histogram | None  # with the guard's similarity column


def gather(
    clusters: DataFrame,
    edges: DataFrame,
    source: DataFrame,
    id_col: str,
    text_col: str,
    sample_clusters: int,
    seed: int,
    statuses: Mapping[str, int] | None = None,
    on_driver: bool = False,
) -> Summary:
    """clusters: the written clusters/ (with the guard's `similarity` column if it ran);
    edges (src, dst, similarity); source: the input rows (id_col, text_col, ...);
    statuses: clusters/ rows per status when the caller counted them already (the job's
    check did), else counted here. on_driver: the caller knows the rows of clusters of
    duplicates are few enough to collect (dedup's broadcast bound): they are, in one job,
    and the sizes, the largest, the sample and its members are found on the driver,
    rather than by eight jobs."""
    if statuses is None:
        statuses = {str(r[C.STATUS]): int(r["count"]) for r in clusters.groupBy(C.STATUS).count().collect()}
    has_similarity = C.SIMILARITY in clusters.columns
    if on_driver and isinstance(clusters.schema[C.ID].dataType, DRIVER_ID_TYPES):
        got = _clusters_on_driver(clusters, has_similarity, sample_clusters, seed)
        edge_similarity = similarity_histogram(edges, C.SIMILARITY)
    else:
        removed = clusters.filter(~F.col(C.KEPT) & F.col(C.CLUSTER_ID).isNotNull())
        histograms = similarity_histograms(
            {"edges": edges, **({"removed": removed} if has_similarity else {})}, C.SIMILARITY
        )
        edge_similarity = histograms["edges"]
        got = _clusters_by_spark(
            clusters, removed, has_similarity, sample_clusters, seed, histograms.get("removed")
        )
    sizes, top, picked, members = got.sizes, got.top, got.picked, got.members
    if statuses.get(C.STATUS_UNIQUE):
        sizes[1] = statuses[C.STATUS_UNIQUE]

    wanted = [k for k, _ in top] + list(members) + [m[0] for ms in members.values() for m in ms]
    texts = _texts(source, id_col, text_col, list(dict.fromkeys(wanted)))

    def doc(doc_id: Any, status: str, similarity: float | None = None) -> Doc:
        text, chars = texts.get(doc_id, (None, 0))
        return Doc(doc_id, status, text, chars, similarity)

    largest = [Cluster(doc(k, C.STATUS_KEPT), n) for k, n in top]
    samples = [
        Cluster(doc(k, C.STATUS_KEPT), n, [doc(i, status, sim) for i, status, sim in members[k]])
        for k, n in picked
    ]
    return Summary(dict(statuses), sizes, edge_similarity, got.removed_similarity, largest, samples)


def _clusters_by_spark(
    clusters: DataFrame,
    removed: DataFrame,
    has_similarity: bool,
    sample_clusters: int,
    seed: int,
    removed_similarity: Histogram | None,
) -> _Clusters:
    """`_Clusters` by Spark: the sizes of the clusters of duplicates (a shuffle of their
    rows), kept while the sizes, the largest and the sample are taken, then the sample's
    members."""
    sizes_df = cluster_sizes(clusters).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        by_size = sizes_df.groupBy(_SIZE).count().collect()
        sizes = {int(r[_SIZE]): int(r["count"]) for r in by_size}
        top = sizes_df.orderBy(F.desc(_SIZE), F.asc(C.CLUSTER_ID)).limit(LARGEST).collect()
        picked = (
            sizes_df.orderBy(*sample_order(seed)).limit(sample_clusters).collect() if sample_clusters else []
        )
    finally:
        sizes_df.unpersist()

    members: dict[Any, list[tuple[Any, str, float | None]]] = {r[C.CLUSTER_ID]: [] for r in picked}
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
            members[r[C.CLUSTER_ID]].append((r[C.ID], str(r[C.STATUS]), r[C.SIMILARITY]))
    return _Clusters(
        sizes,
        [(r[C.CLUSTER_ID], int(r[_SIZE])) for r in top],
        [(r[C.CLUSTER_ID], int(r[_SIZE])) for r in picked],
        members,
        removed_similarity,
    )


def _clusters_on_driver(
    clusters: DataFrame, has_similarity: bool, sample_clusters: int, seed: int
) -> _Clusters:
    """`_Clusters` from one collect of the rows of clusters of duplicates (kept, exact and
    near duplicates: cluster_id, id, status, similarity, the sample's hash), in the same
    orders as `_clusters_by_spark`."""
    similarity = (
        F.coalesce(F.col(C.SIMILARITY), F.lit(float("nan"))) if has_similarity else F.lit(float("nan"))
    )
    rows = clusters.filter(F.col(C.STATUS).isin(C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR)).select(
        C.CLUSTER_ID,
        C.ID,
        C.STATUS,
        similarity.alias(C.SIMILARITY),
        sample_order(seed)[0].alias(_HASH),
    )
    got = collect_arrays(rows, [C.CLUSTER_ID, C.ID, C.STATUS, C.SIMILARITY, _HASH])
    status, ids = got[C.STATUS].astype(str), got[C.ID]
    is_kept = status == C.STATUS_KEPT
    # Clusters in order of their kept id (`id_arrays.unique` sorts): the orders by size and by hash
    # are then stable sorts, ties in kept-id order, as Spark's second sort key has them.
    keys, inverse, counts = id_arrays.unique(got[C.CLUSTER_ID])
    first = id_arrays.first_index(inverse, counts)
    has_kept = np.zeros(len(keys), bool)
    has_kept[inverse[is_kept]] = True
    # A cluster kept by an indexed document (dedup --against) has no row of its kept one.
    size = counts + ~has_kept
    values, per_value = np.unique(size, return_counts=True)
    by_size = np.argsort(-size, kind="stable")[:LARGEST]
    by_hash = np.argsort(got[_HASH][first], kind="stable")[:sample_clusters]
    # The sample's removed members: by cluster, near duplicates first, then by id (stable
    # sorts, the last key first); the first MEMBERS_PER_SAMPLE of each.
    mine = np.flatnonzero(~is_kept & np.isin(inverse, by_hash))
    mine = mine[id_arrays.argsort(ids[mine])]
    mine = mine[np.argsort(status[mine] == C.STATUS_EXACT, kind="stable")]
    mine = mine[np.argsort(inverse[mine], kind="stable")]
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[mine]) != 0])
    rank = np.arange(len(mine)) - np.repeat(starts, np.diff(np.r_[starts, len(mine)]))
    mine = mine[rank < MEMBERS_PER_SAMPLE]
    key_of = keys.tolist()
    sims = got[C.SIMILARITY].astype(np.float64)
    members: dict[Any, list[tuple[Any, str, float | None]]] = {key_of[c]: [] for c in by_hash.tolist()}
    for c, i, st, sim in zip(
        inverse[mine].tolist(), ids[mine].tolist(), status[mine].tolist(), sims[mine].tolist(), strict=True
    ):
        members[key_of[c]].append((i, st, None if np.isnan(sim) else sim))
    histogram = None
    if has_similarity:
        removed = sims[~is_kept]
        valid = removed[~np.isnan(removed)]
        bins = np.minimum(np.floor(valid * BINS + BIN_SLACK), BINS - 1).astype(np.int64)
        b, n = np.unique(bins, return_counts=True)
        histogram = Histogram(dict(zip(b.tolist(), n.tolist(), strict=True)), int(np.isnan(removed).sum()))
    return _Clusters(
        dict(zip(values.tolist(), per_value.tolist(), strict=True)),
        [(key_of[c], int(size[c])) for c in by_size.tolist()],
        [(key_of[c], int(size[c])) for c in by_hash.tolist()],
        members,
        histogram,
    )
