"""Stage: group exact copies (equal normalized text) by their 128-bit hash.

Exact copies are settled before LSH: only one representative per group is banded
and verified, which keeps identical copies out of LSH buckets. The representative
is the best document of its group by the survivor policy, so the policy picks the
same survivor whether a copy is exact or near.

Within the broadcast bound (`exact_on_driver`) the driver groups them instead, from one
collect that also brings the representatives' band keys for the candidates stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.exact_reps import exact_reps
from neardup.kernels.policy import SortKey, carried_columns, survivor_order
from neardup.kernels.policy_order import HeldOrder
from neardup.kernels.signatures import band_keys_of
from neardup.stages.driver_frames import collect_table, frame_from_table
from neardup.stages.survivor_order import survivor_columns

# Types whose order in Arrow is Spark's (strings: both by UTF-8 bytes), for the survivor
# policy's keys on the driver; others (floating point, decimals, dates, timestamps) are
# ordered by the window.
_DRIVER_ORDER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)
# What `exact_on_driver` collects a document besides its id and band keys: two hashes,
# the length in characters and in bytes, and survivor.column's value (a string's taken to
# be this long).
HELD_BYTES = 8 + 8 + 4 + 4 + 64


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


def _order(cfg: Config) -> list[SortKey]:
    s = cfg.survivor
    return survivor_order(s.policy, bool(s.column), s.then)


def orders_on_driver(signed: DataFrame, cfg: Config) -> bool:
    """Whether the survivor policy's keys are of types the driver orders as Spark does."""
    types = {f.name: f.dataType for f in signed.schema.fields}
    return all(isinstance(types[k.column], _DRIVER_ORDER_TYPES) for k in _order(cfg))


@dataclass(frozen=True)
class HeldMembers:
    """The signed documents as the exact stage collected them on the driver: what the
    survivors, the guard's ranking and the write take there instead of the members frame,
    and the sizes of the texts the guard and the star rounds collect to the driver."""

    ids: pa.Array  # every signed document's id
    rep: np.ndarray  # each one's representative's row
    rep_rows: np.ndarray  # the representatives' rows
    order: HeldOrder  # the representatives' policy keys, a row per one of `rep_rows`
    sizes: np.ndarray  # the representatives' texts in UTF-8 bytes, a row per one of `rep_rows`

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The rows of representatives' `ids` (each must be one)."""
        return self.rep_rows[self.order.rows(ids)]

    def text_bytes(self, ids: np.ndarray) -> int | None:
        """The UTF-8 bytes of the texts of `ids`, or None where one is not a representative
        held here (an indexed document of a --against run)."""
        try:
            rows = self.order.rows(ids)
        except ValueError:
            return None
        return int(self.sizes[rows].sum(dtype=np.int64))


@dataclass(frozen=True)
class HeldExact:
    """`exact_on_driver`'s results: the frames `group_exact` and `exact_groups` give, and
    what the candidates stage takes on the driver."""

    members: DataFrame  # (_id, _rep, _len, *carried)
    groups: DataFrame  # (_rep, _copies)
    copy_ids: np.ndarray  # the exact copies' ids
    rep_ids: pa.Array  # the representatives' ids
    band_keys: np.ndarray  # (documents, bands): every collected document's keys
    held: HeldMembers  # the representatives' rows (of `band_keys` too), policy keys and sizes


def exact_on_driver(accepted: DataFrame, cfg: Config) -> HeldExact:
    """`group_exact` and `exact_groups` on the driver: one collect of the signed rows' ids,
    hashes, policy columns and band keys (kernels/exact_reps.py groups them), the frames
    returned RDD-backed. For at most the broadcast bound's documents whose policy keys
    `orders_on_driver`; the band keys stay for the candidates (`candidates.candidate_edges`'
    `held`), so they are not collected twice, and the representatives' policy keys for the
    survivors, the guard's ranking and the write, and their texts' bytes for the texts the
    guard and the star rounds collect (`HeldMembers`)."""
    carried = list(carried_columns(cfg.survivor.policy))
    keys = _order(cfg)
    table = collect_table(
        accepted.select(C.DOC_ID, C.TEXT_HASH, C.TEXT_HASH_LO, C.LENGTH, C.BYTES, *carried, C.BAND_KEYS)
    )
    order = table.select([k.column for k in keys])
    hi, lo = table.column(C.TEXT_HASH).to_numpy(), table.column(C.TEXT_HASH_LO).to_numpy()
    rep = exact_reps(hi, lo, order, keys)
    ids = table.column(C.DOC_ID).combine_chunks()
    fields = {f.name: f for f in accepted.schema.fields}
    id_field = fields[C.DOC_ID]
    members = pa.table(
        [ids, ids.take(pa.array(rep)), table.column(C.LENGTH), *(table.column(c) for c in carried)],
        names=[C.DOC_ID, C.REP, C.LENGTH, *carried],
    )
    members_schema = T.StructType(
        [
            id_field,
            T.StructField(C.REP, id_field.dataType, True),
            fields[C.LENGTH],
            *(fields[c] for c in carried),
        ]
    )
    spark = accepted.sparkSession
    copy = rep != np.arange(len(rep))
    reps_of_copies, copies = np.unique(rep[copy], return_counts=True)
    groups = pa.table(
        [ids.take(pa.array(reps_of_copies)), pa.array(copies, pa.int64())], names=[C.REP, C.COPIES]
    )
    groups_schema = T.StructType(
        [T.StructField(C.REP, id_field.dataType, True), T.StructField(C.COPIES, T.LongType(), False)]
    )
    rows, band_keys = band_keys_of(table.column(C.BAND_KEYS))
    if len(rows) != table.num_rows:
        raise ValueError("a signed document without band keys")
    kept = np.flatnonzero(~copy)
    return HeldExact(
        frame_from_table(spark, members, members_schema),
        frame_from_table(spark, groups, groups_schema),
        ids.filter(pa.array(copy)).to_numpy(zero_copy_only=False),
        ids.take(pa.array(kept)),
        band_keys,
        HeldMembers(
            ids,
            rep,
            kept,
            HeldOrder(order.take(pa.array(kept)), keys),
            table.column(C.BYTES).to_numpy()[kept],
        ),
    )
