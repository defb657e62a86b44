"""Stage: one survivor per cluster, and every document's status.

A cluster is a connected component of verified edges between exact-group
representatives, together with the exact copies of its members. The survivor is
the best representative by the survivor policy (ties: smallest id); since each
representative is already the best of its exact group, it is the best document
of the whole cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.policy import survivor_order

_EXACT = "_is_exact"
_SIZE = "_size"
_REP_SIM = "_rep_similarity"
_BEST = "_best"  # choose_survivors: the smallest struct of a component
_BEST_ID = "_best_id"  # its last field: the node's id


def survivor_columns(cfg: Config, prefer_index: bool = False) -> list[Column]:
    """The survivor policy as Spark sort columns, best first, nulls last; `prefer_index`:
    led by `_from_index` (dedup --against)."""
    out = []
    policy = cfg.survivor
    for key in survivor_order(policy.policy, bool(policy.column), policy.then, prefer_index):
        col = F.col(key.column)
        out.append(col.desc_nulls_last() if key.descending else col.asc_nulls_last())
    return out


def priority_rank(column: str, values: Sequence[str]) -> Column:
    """survivor.priority as `_priority`: the position in `values` of the column's value
    compared as text (so 3 in the list matches an integer column's 3 and a CSV's "3"),
    len(values) for a value not in the list or null. One comparison per listed value, in
    the JVM: a CASE, the same on Spark 3.5 and 4 (pyspark's array_position takes a column
    to look for only from 4.0; before, a literal)."""
    text = F.col(column).cast("string")
    rank = F.when(text == values[0], 0)
    for i, value in enumerate(values[1:], start=1):
        rank = rank.when(text == value, i)
    return rank.otherwise(len(values)).cast("int")


def choose_survivors(
    reps: DataFrame, components: DataFrame, cfg: Config, small: bool = True, prefer_index: bool = False
) -> DataFrame:
    """reps (_id, _len, _rank[, _priority][, _from_index]): exact-group representatives;
    components (_id, _component) -> (_id, _kept_id) for each component node: the best node
    of its component by the survivor policy. `small`: broadcast the components and the
    choices (never shuffle the reps). `prefer_index`: indexed documents (`_from_index` true)
    first.

    The choice is an aggregation: the smallest of one struct per node whose fields order as
    the policy does (`_ascending`), combined in each task before the shuffle, so a cluster
    of millions of documents never meets in one task (a window by component gathered it
    whole). Where a key has no such field (a descending string survivor.column), the window.
    """
    side = F.broadcast(components) if small else components
    nodes = reps.join(side, C.DOC_ID)
    types = {f.name: f.dataType for f in nodes.schema.fields}
    fields: list[Column] = []
    policy = cfg.survivor
    for key in survivor_order(policy.policy, bool(policy.column), policy.then, prefer_index):
        ascending = _ascending(F.col(key.column), types[key.column], key.descending)
        if ascending is None:
            cluster = Window.partitionBy(C.COMPONENT).orderBy(*survivor_columns(cfg, prefer_index))
            return nodes.select(C.DOC_ID, F.first(C.DOC_ID).over(cluster).alias(C.KEPT_ID))
        fields += ascending
    keyed = [c.alias(f"_k{i}") for i, c in enumerate(fields)]
    best = F.min(F.struct(*keyed, F.col(C.DOC_ID).alias(_BEST_ID)))
    chosen = (
        nodes.groupBy(C.COMPONENT)
        .agg(best.alias(_BEST))
        .select(C.COMPONENT, F.col(f"{_BEST}.{_BEST_ID}").alias(C.KEPT_ID))
    )
    return components.join(F.broadcast(chosen) if small else chosen, C.COMPONENT).select(C.DOC_ID, C.KEPT_ID)


def _ascending(col: Column, dtype: T.DataType, descending: bool) -> list[Column] | None:
    """Struct fields whose ascending order (Spark's, nulls first) is the sort key's, nulls
    last: a null flag, then for floating point a NaN flag (NaN is the largest value), then
    the value, reversed for a descending key by a bitwise not (integers, dates and
    timestamps: exact, no overflow), a negation (floating point, decimals) or a not
    (booleans). None for a descending key of another type."""
    flags = [col.isNull()]
    floating = isinstance(dtype, (T.FloatType, T.DoubleType))
    if not descending:
        return [*flags, col]
    if floating:
        flags.append(~F.isnan(col))  # descending: NaN first
    if isinstance(dtype, T.BooleanType):
        return [*flags, ~col]
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return [*flags, F.bitwise_not(col)]
    if isinstance(dtype, T.DateType):
        return [*flags, F.bitwise_not(F.unix_date(col))]
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return [*flags, F.bitwise_not(F.unix_micros(col.cast("timestamp")))]
    if floating or isinstance(dtype, T.DecimalType):
        return [*flags, -col]
    return None


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


def select_survivors(
    members: DataFrame, groups: DataFrame, components: DataFrame, cfg: Config, small: bool = True
) -> DataFrame:
    """members (_id, _rep, _len, _rank[, _priority]): every signed document and exact copy; groups
    (_rep, _copies): `exact_groups` of members; components (_id, _component):
    representatives that have a verified edge -> (_id, _kept_id, status, _size,
    similarity) with one row per member, before any guard (similarity null but for exact
    copies of kept documents)."""
    reps = members.filter(F.col(C.REP) == F.col(C.DOC_ID))
    chosen = choose_survivors(reps, components, cfg, small).withColumn(
        C.SIMILARITY, F.lit(None).cast("double")
    )
    return assign_members(members, chosen, cluster_sizes(chosen, groups), small)
