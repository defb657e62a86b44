"""Stage: group exact copies (equal normalized text) by their 128-bit hash.

Exact copies are settled before LSH: only one representative per group is banded
and verified, which keeps identical copies out of LSH buckets. The representative
is the best document of its group by the survivor policy, so the policy picks the
same survivor whether a copy is exact or near.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.policy import carried_columns
from neardup.stages.survivor_order import survivor_columns


def group_exact(hashed: DataFrame, cfg: Config) -> DataFrame:
    """(_id, _thash, _thash_lo, _len, _rank[, _priority]) of non-empty texts ->
    (_id, _rep, _len, _rank[, _priority]): the policy's columns go on to the survivors.

    `_rep` is the id of the group's best document by the survivor policy (its own
    id for a representative). One shuffle, by the 128-bit text hash.
    """
    group = Window.partitionBy(C.TEXT_HASH, C.TEXT_HASH_LO).orderBy(*survivor_columns(cfg))
    return hashed.select(
        C.DOC_ID,
        F.first(C.DOC_ID).over(group).alias(C.REP),
        C.LENGTH,
        *carried_columns(cfg.survivor.policy),
    )


def exact_groups(members: DataFrame) -> DataFrame:
    """(_id, _rep, ...) -> (_rep, _copies) for every exact group with copies: a row per
    representative that has any, so at most one per exact copy. Cluster sizes are summed
    from it (stages/membership.cluster_sizes) without going back to the members."""
    copies = members.filter(F.col(C.REP) != F.col(C.DOC_ID))
    return copies.groupBy(C.REP).agg(F.count(F.lit(1)).alias(C.COPIES))
