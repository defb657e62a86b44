"""Stage: every document's cluster, size and status, from the representatives' choices.

A cluster's size counts each representative with its exact copies, summed from the
representatives and the exact groups alone (`cluster_sizes`, `clustered_figures`; within
the broadcast bound on the driver, `sizes_on_driver`), so the members are read once, at the
end (`assign_members`): each takes its representative's kept document, and its status
(unique, kept, exact or near duplicate) follows. Where the exact stage held the members on
the driver, `assign_on_driver` does the same there and the members frame is not read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels.assignment import STATUSES, assign
from neardup.kernels.cluster_sizes import cluster_sizes as sizes_of_arrays
from neardup.kernels.cluster_sizes import size_figures
from neardup.stages.driver_frames import collect_arrays, frame_from_arrays, frame_from_table
from neardup.stages.exact import HeldMembers

_EXACT = "_is_exact"
_SIZE = "_size"
_REP_SIM = "_rep_similarity"


def cluster_sizes(clustered: DataFrame, groups: DataFrame) -> DataFrame:
    """clustered (_id, _kept_id): the representatives in a cluster (kept ones included);
    groups (_rep, _copies): the exact groups with copies -> (_kept_id, _size) for every
    kept document whose cluster holds more than itself.

    A representative counts with its exact copies. Representatives outside any cluster
    that have copies are clusters of their own (their exact group). Both inputs are
    small (bounded by the verified edges and the exact copies), so this never touches
    the members: sizes come from representatives, and the members join them once, at
    the end (`assign_members`).
    """
    weights = clustered.join(groups.withColumnRenamed(C.REP, C.DOC_ID), C.DOC_ID, "left").select(
        C.KEPT_ID, (F.coalesce(F.col(C.COPIES), F.lit(0)) + 1).alias(_SIZE)
    )
    in_clusters = weights.groupBy(C.KEPT_ID).agg(F.sum(_SIZE).alias(_SIZE))
    alone = groups.join(clustered.withColumnRenamed(C.DOC_ID, C.REP), C.REP, "left_anti").select(
        F.col(C.REP).alias(C.KEPT_ID), (F.col(C.COPIES) + 1).alias(_SIZE)
    )
    return in_clusters.unionByName(alone)


def _summed_on_driver(ids: np.ndarray, kept: np.ndarray, groups: DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`cluster_sizes` of the clustered representatives (`ids`, each with its `kept`
    document) summed on the driver (kernels/cluster_sizes.py) from the groups (_rep,
    _copies), collected."""
    exact = collect_arrays(groups, [C.REP, C.COPIES])
    return sizes_of_arrays(ids, kept, exact[C.REP], exact[C.COPIES])


def sizes_on_driver(clustered: DataFrame, groups: DataFrame) -> tuple[DataFrame, dict[str, int]]:
    """`cluster_sizes` of clustered (_id, _kept_id) and groups (_rep, _copies), both small
    enough to collect (the broadcast bound, ids of a driver type), as a frame of the
    driver's arrays, and its figures (clusters, largest, removed).

    Two collects in place of a join, an aggregation, an anti-join and a job for the
    figures: about 1.6 s of the guard on 1,000,000 documents, 2.4 s with the skew
    benchmark's large clusters."""
    got = collect_arrays(clustered, [C.DOC_ID, C.KEPT_ID])
    kept_ids, sizes = _summed_on_driver(got[C.DOC_ID], got[C.KEPT_ID], groups)
    kept_field = T.StructField(C.KEPT_ID, clustered.schema[C.DOC_ID].dataType, False)
    schema = T.StructType([kept_field, T.StructField(_SIZE, T.LongType(), False)])
    frame = frame_from_arrays(clustered.sparkSession, {C.KEPT_ID: kept_ids, _SIZE: sizes}, schema)
    return frame, size_figures(sizes)


def clustered_on_driver(clustered: DataFrame, groups: DataFrame) -> tuple[DataFrame, int, int]:
    """`clustered_figures` from two collects, for inputs as `sizes_on_driver` takes, and
    clustered again as a frame of the driver's arrays (a plan of one node for the guard's
    rounds): (that frame, its rows, the largest cluster's size in documents)."""
    got = collect_arrays(clustered, [C.DOC_ID, C.KEPT_ID])
    return clustered_of_arrays(got[C.DOC_ID], got[C.KEPT_ID], clustered.schema[C.DOC_ID].dataType, groups)


def clustered_of_arrays(
    ids: np.ndarray, kept: np.ndarray, id_type: T.DataType, groups: DataFrame
) -> tuple[DataFrame, int, int]:
    """`clustered_on_driver` of the clustered representatives the driver holds (`ids`, each
    with its `kept` document, of `id_type`): one collect, of the groups."""
    _, sizes = _summed_on_driver(ids, kept, groups)
    schema = T.StructType([T.StructField(C.DOC_ID, id_type, False), T.StructField(C.KEPT_ID, id_type, False)])
    frame = frame_from_arrays(groups.sparkSession, {C.DOC_ID: ids, C.KEPT_ID: kept}, schema)
    return frame, len(ids), size_figures(sizes)["largest"]


def clustered_figures(clustered: DataFrame, groups: DataFrame) -> tuple[int, int]:
    """clustered (_id, _kept_id), groups (_rep, _copies) as for `cluster_sizes` -> (rows of
    clustered, the largest cluster's size in documents; 1 when no document has a
    duplicate), in one query.

    The largest is the largest of the clusters' sizes and of every exact group's (copies +
    1): a group inside a cluster is no larger than its cluster, so the groups need not be
    told apart from those outside any cluster (`cluster_sizes` must, for its rows).
    """
    weights = clustered.join(groups.withColumnRenamed(C.REP, C.DOC_ID), C.DOC_ID, "left").select(
        C.KEPT_ID, (F.coalesce(F.col(C.COPIES), F.lit(0)) + 1).alias(_SIZE)
    )
    per_cluster = weights.groupBy(C.KEPT_ID).agg(F.sum(_SIZE).alias(_SIZE), F.count(F.lit(1)).alias("_reps"))
    alone = groups.select((F.col(C.COPIES) + 1).alias(_SIZE), F.lit(0).cast("long").alias("_reps"))
    row = (
        per_cluster.select(_SIZE, "_reps")
        .unionByName(alone)
        .agg(F.sum("_reps").alias("rows"), F.max(_SIZE).alias("largest"))
        .first()
    )
    assert row is not None
    return int(row["rows"] or 0), int(row["largest"] or 1)


def assign_members(members: DataFrame, chosen: DataFrame, sizes: DataFrame, small: bool = True) -> DataFrame:
    """members (_id, _rep, ...): every signed document; chosen (_id, _kept_id, similarity):
    the representatives that are in a cluster, with their kept document and their
    similarity to it; sizes (_kept_id, _size): `cluster_sizes` of chosen
    -> (_id, _kept_id, status, _size, similarity) with one row per member.

    Representatives not in `chosen` survive themselves; each member takes its
    representative's kept document. An exact copy's similarity is its representative's
    (the same normalized text), 1.0 when the representative is kept; null for kept
    documents. `small`: chosen and sizes are broadcast, so the members are read once and
    never shuffled; else they are shuffle-joined.
    """

    def side(df: DataFrame) -> DataFrame:
        return F.broadcast(df) if small else df

    picked = chosen.select(
        F.col(C.DOC_ID).alias(C.REP), F.col(C.KEPT_ID), F.col(C.SIMILARITY).alias(_REP_SIM)
    )
    assigned = (
        members.join(side(picked), C.REP, "left")
        .select(
            C.DOC_ID,
            C.REP,
            F.coalesce(F.col(C.KEPT_ID), F.col(C.REP)).alias(C.KEPT_ID),
            (F.col(C.DOC_ID) != F.col(C.REP)).alias(_EXACT),
            F.col(_REP_SIM),
        )
        .join(side(sizes), C.KEPT_ID, "left")
        .withColumn(_SIZE, F.coalesce(F.col(_SIZE), F.lit(1).cast("long")))
    )
    is_kept = F.col(C.DOC_ID) == F.col(C.KEPT_ID)
    status = (
        F.when(is_kept, F.when(F.col(_SIZE) > 1, C.STATUS_KEPT).otherwise(C.STATUS_UNIQUE))
        .when(F.col(_EXACT), C.STATUS_EXACT)
        .otherwise(C.STATUS_NEAR)
    )
    similarity = (
        F.when(is_kept, F.lit(None).cast("double"))
        # A copy of the kept document itself: its representative is the kept one.
        .when(F.col(C.REP) == F.col(C.KEPT_ID), F.lit(1.0))
        .otherwise(F.col(_REP_SIM))
    )
    return assigned.select(
        C.DOC_ID, C.KEPT_ID, status.alias(C.STATUS), F.col(_SIZE), similarity.alias(C.SIMILARITY)
    )


def assign_on_driver(held: HeldMembers, members: DataFrame, chosen: DataFrame, sizes: DataFrame) -> DataFrame:
    """`assign_members` where the driver holds the members (the exact stage's `held`, of
    the `members` frame): chosen and sizes collected (both within the broadcast bound),
    each member's row found by kernels/assignment.py, and the rows returned as a frame of
    the driver's arrays, sorted by id, its partitions in that order (so clusters/ needs no
    sort). Two small collects and no join: the broadcasts' jobs, the members' rows made
    once, and the sort of clusters/ (a sampling job and a shuffle) are saved."""
    nan = F.lit(float("nan"))
    picked = collect_arrays(
        chosen.select(C.DOC_ID, C.KEPT_ID, F.coalesce(C.SIMILARITY, nan).alias(C.SIMILARITY)),
        [C.DOC_ID, C.KEPT_ID, C.SIMILARITY],
    )
    sized = collect_arrays(sizes, [C.KEPT_ID, _SIZE])
    kept, status, size, similarity = assign(
        held.rep,
        held.rows(picked[C.DOC_ID]),
        held.rows(picked[C.KEPT_ID]),
        picked[C.SIMILARITY],
        held.rows(sized[C.KEPT_ID]),
        sized[_SIZE],
    )
    by_id = pc.sort_indices(held.ids).to_numpy()
    codes = pa.DictionaryArray.from_arrays(pa.array(status[by_id]), pa.array(STATUSES))
    table = pa.table(
        {
            C.DOC_ID: held.ids.take(pa.array(by_id)),
            C.KEPT_ID: held.ids.take(pa.array(kept[by_id])),
            C.STATUS: codes.cast(pa.string()),
            _SIZE: pa.array(size[by_id]),
            C.SIMILARITY: pa.array(similarity[by_id], from_pandas=True),
        }
    )
    # The schema `assign_members` gives (its nullability too): analysis only, no job.
    schema = assign_members(members, chosen, sizes).schema
    return frame_from_table(members.sparkSession, table, schema)
