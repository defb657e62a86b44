"""Stage: one survivor per cluster.

A cluster is a connected component of verified edges between exact-group
representatives, together with the exact copies of its members. The survivor is
the best representative by the survivor policy (ties: smallest id); since each
representative is already the best of its exact group, it is the best document
of the whole cluster. Sizes and every member's status: membership.py.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.kernels import id_arrays
from neardup.kernels.policy import survivor_order
from neardup.kernels.policy_order import HeldOrder
from neardup.stages.driver_frames import collect_arrays, ids_frame
from neardup.stages.survivor_order import ascending, survivor_columns

_BEST = "_best"  # choose_survivors: the smallest struct of a component
_BEST_ID = "_best_id"  # its last field: the node's id


def choose_survivors(
    reps: DataFrame, components: DataFrame, cfg: Config, small: bool = True, prefer_index: bool = False
) -> DataFrame:
    """reps (_id, _len, _rank[, _priority][, _from_index]): exact-group representatives;
    components (_id, _component) -> (_id, _kept_id) for each component node: the best node
    of its component by the survivor policy. `small`: broadcast the components and the
    choices (never shuffle the reps). `prefer_index`: indexed documents (`_from_index` true)
    first.

    The choice is an aggregation: the smallest of one struct per node whose fields order as
    the policy does (`survivor_order.ascending`), combined in each task before the shuffle, so a cluster
    of millions of documents never meets in one task (a window by component gathered it
    whole). Where a key has no such field (a descending string survivor.column), the window.
    """
    side = F.broadcast(components) if small else components
    nodes = reps.join(side, C.DOC_ID)
    types = {f.name: f.dataType for f in nodes.schema.fields}
    fields: list[Column] = []
    policy = cfg.survivor
    for key in survivor_order(policy.policy, bool(policy.column), policy.then, prefer_index):
        fields_of = ascending(F.col(key.column), types[key.column], key.descending)
        if fields_of is None:
            cluster = Window.partitionBy(C.COMPONENT).orderBy(*survivor_columns(cfg, prefer_index))
            return nodes.select(C.DOC_ID, F.first(C.DOC_ID).over(cluster).alias(C.KEPT_ID))
        fields += fields_of
    keyed = [c.alias(f"_k{i}") for i, c in enumerate(fields)]
    best = F.min(F.struct(*keyed, F.col(C.DOC_ID).alias(_BEST_ID)))
    chosen = (
        nodes.groupBy(C.COMPONENT)
        .agg(best.alias(_BEST))
        .select(C.COMPONENT, F.col(f"{_BEST}.{_BEST_ID}").alias(C.KEPT_ID))
    )
    return components.join(F.broadcast(chosen) if small else chosen, C.COMPONENT).select(C.DOC_ID, C.KEPT_ID)


def survivors_on_driver(components: DataFrame, order: HeldOrder) -> tuple[np.ndarray, np.ndarray]:
    """`choose_survivors` of components (_id, _component) by the policy's keys the driver
    holds (the exact stage's `HeldOrder` of the representatives, dedup without --against):
    one collect of the components and a sort, where the Spark choice ran a join, an
    aggregation and a join back (eight jobs, 1.4 s on 1,000,000 documents)
    -> (ids, kept ids) of every component node."""
    got = collect_arrays(components, [C.DOC_ID, C.COMPONENT])
    ids = got[C.DOC_ID]
    _, groups, _ = id_arrays.unique(got[C.COMPONENT])
    return ids, order.best_of_groups(ids, groups)


def survivor_ranking(reps: DataFrame, ids: np.ndarray, cfg: Config, prefer_index: bool = False) -> np.ndarray:
    """ids: representatives, few enough to collect -> the same, best first by the survivor
    policy (`survivor_columns`, the order of `choose_survivors`' struct): the best of any
    group of them is the one ranked first. One sort, for the guard's rounds on the driver
    where it holds no `HeldOrder`."""
    frame = ids_frame(reps.sparkSession, ids, reps.schema[C.DOC_ID].dataType)
    nodes = reps.join(F.broadcast(frame), C.DOC_ID)
    ranked = nodes.orderBy(*survivor_columns(cfg, prefer_index)).select(C.DOC_ID)
    return collect_arrays(ranked, [C.DOC_ID])[C.DOC_ID]
