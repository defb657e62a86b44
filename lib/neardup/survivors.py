"""Stage 6: one survivor per cluster, and every document's status.

A cluster is a connected component of verified edges between exact-group
representatives, together with the exact copies of its members. The survivor is
the best representative by the survivor policy (ties: smallest id); since each
representative is already the best of its exact group, it is the best document
of the whole cluster.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.sparkutil import survivor_columns

_EXACT = "_is_exact"
_SIZE = "_size"


def select_survivors(members: DataFrame, components: DataFrame, cfg: Config) -> DataFrame:
    """members (_id, _rep, _len, _rank): every document that was signed or is an exact copy;
    components (_id, _component): representatives that have a verified edge ->
    (_id, _kept_id, status, _size) with one row per member.

    Shuffles: the components join, the window by component, the join of exact copies
    to their representative's survivor, and the window counting cluster sizes.
    """
    reps = members.filter(F.col(C.REP) == F.col(C.DOC_ID)).join(components, C.DOC_ID, "left")
    reps = reps.withColumn(C.COMPONENT, F.coalesce(F.col(C.COMPONENT), F.col(C.DOC_ID)))
    cluster = Window.partitionBy(C.COMPONENT).orderBy(*survivor_columns(cfg))
    rep_kept = reps.select(C.DOC_ID, F.first(C.DOC_ID).over(cluster).alias(C.KEPT_ID))
    copies = (
        members.filter(F.col(C.REP) != F.col(C.DOC_ID))
        .select(C.DOC_ID, C.REP)
        .join(rep_kept.select(F.col(C.DOC_ID).alias(C.REP), C.KEPT_ID), C.REP)
        .select(C.DOC_ID, C.KEPT_ID, F.lit(True).alias(_EXACT))
    )
    assigned = rep_kept.select(C.DOC_ID, C.KEPT_ID, F.lit(False).alias(_EXACT)).unionByName(copies)
    size = F.count(F.lit(1)).over(Window.partitionBy(C.KEPT_ID))
    assigned = assigned.withColumn(_SIZE, size)
    status = (
        F.when(
            F.col(C.DOC_ID) == F.col(C.KEPT_ID),
            F.when(F.col(_SIZE) > 1, C.STATUS_KEPT).otherwise(C.STATUS_UNIQUE),
        )
        .when(F.col(_EXACT), C.STATUS_EXACT)
        .otherwise(C.STATUS_NEAR)
    )
    return assigned.select(C.DOC_ID, C.KEPT_ID, status.alias(C.STATUS), F.col(_SIZE))
