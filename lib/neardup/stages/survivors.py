"""Stage: one survivor per cluster, and every document's status.

A cluster is a connected component of verified edges between exact-group
representatives, together with the exact copies of its members. The survivor is
the best representative by the survivor policy (ties: smallest id); since each
representative is already the best of its exact group, it is the best document
of the whole cluster.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.policy import survivor_order

_EXACT = "_is_exact"
_SIZE = "_size"


def survivor_columns(cfg: Config) -> list[Column]:
    """The survivor policy as Spark sort columns, best first, nulls last."""
    out = []
    for key in survivor_order(cfg.survivor.policy, bool(cfg.survivor.column)):
        col = F.col(key.column)
        out.append(col.desc_nulls_last() if key.descending else col.asc_nulls_last())
    return out


def select_survivors(members: DataFrame, components: DataFrame, cfg: Config, small: bool = True) -> DataFrame:
    """members (_id, _rep, _len, _rank): every document that was signed or is an exact copy;
    components (_id, _component): representatives that have a verified edge ->
    (_id, _kept_id, status, _size) with one row per member.

    Only representatives with a verified edge have a survivor to choose (a window by
    component over those few); every other representative survives itself. Each member
    then takes its representative's survivor. `small`: the edge-side frames (components
    and the clusters they make, at most twice the verified edges) are broadcast, so the
    members are never shuffled; else they are shuffle-joined.
    """

    def side(df: DataFrame) -> DataFrame:
        return F.broadcast(df) if small else df

    reps = members.filter(F.col(C.REP) == F.col(C.DOC_ID))
    cluster = Window.partitionBy(C.COMPONENT).orderBy(*survivor_columns(cfg))
    chosen = reps.join(side(components), C.DOC_ID).select(
        F.col(C.DOC_ID).alias(C.REP), F.first(C.DOC_ID).over(cluster).alias(C.KEPT_ID)
    )
    assigned = members.join(side(chosen), C.REP, "left").select(
        C.DOC_ID,
        F.coalesce(F.col(C.KEPT_ID), F.col(C.REP)).alias(C.KEPT_ID),
        (F.col(C.DOC_ID) != F.col(C.REP)).alias(_EXACT),
    )
    removed = assigned.filter(F.col(C.DOC_ID) != F.col(C.KEPT_ID))
    sizes = removed.groupBy(C.KEPT_ID).agg((F.count(F.lit(1)) + 1).alias(_SIZE))
    assigned = assigned.join(side(sizes), C.KEPT_ID, "left").withColumn(
        _SIZE, F.coalesce(F.col(_SIZE), F.lit(1).cast("long"))
    )
    status = (
        F.when(
            F.col(C.DOC_ID) == F.col(C.KEPT_ID),
            F.when(F.col(_SIZE) > 1, C.STATUS_KEPT).otherwise(C.STATUS_UNIQUE),
        )
        .when(F.col(_EXACT), C.STATUS_EXACT)
        .otherwise(C.STATUS_NEAR)
    )
    return assigned.select(C.DOC_ID, C.KEPT_ID, status.alias(C.STATUS), F.col(_SIZE))
