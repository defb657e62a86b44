"""The survivor policy as Spark columns: the sort that picks a cluster's kept document
(`survivor_columns`), the same order as the fields of one struct whose minimum is the best
document (`ascending`, so the choice is an aggregation), and survivor.priority's rank
(`priority_rank`, computed when the input is read). The order itself is
kernels/policy.py's; survivors.py, exact.py and read.py use these.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.config import Config
from neardup.kernels.policy import survivor_order


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


def ascending(col: Column, dtype: T.DataType, descending: bool) -> list[Column] | None:
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
