"""Small frames to the driver as numpy arrays and back, for the work a driver does faster
than a dozen Spark jobs would (components.py's labels, stars.py's rounds, guard.py's rounds
and nearest step, membership.py's cluster sizes).

Collects are Arrow batches on both Spark lines (3.5: those its toPandas reads); frames are
made from Arrow on Spark 4, through pandas on 3.5. A frame made from driver data is backed
by an RDD, not held in its plan (`_driver_relation`), in at most a partition per core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C

# Id types whose values come back from Arrow exactly and order in Python as in Spark
# (strings: code point order is UTF-8 byte order). Others (decimals, dates, timestamps)
# take the distributed paths.
DRIVER_ID_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)


def collect_arrays(df: DataFrame, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """`columns` of `df` (no nulls in them) as numpy arrays, in one job."""
    table = collect_table(df.select(*columns))
    return {c: table.column(c).to_numpy() for c in columns}


def collect_table(df: DataFrame) -> pa.Table:
    """`df` as one Arrow table, in one job (what `collect_arrays` reads; binary columns and
    those that stay in Arrow are taken from it whole)."""
    if hasattr(df, "toArrow"):  # Spark 4
        return df.toArrow()
    # Spark 3.5: the Arrow batches its toPandas collects (through pandas, a nullable integer
    # column would come back as floats and binary values as Python objects).
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df._collect_as_arrow()  # type: ignore[operator]
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()


def nan_as_null(name: str) -> Column:
    """Column `name` with NaN as null: a nullable double collected as NaN (`collect_arrays`
    takes no nulls), back in a frame of the arrays."""
    return F.when(~F.isnan(name), F.col(name)).alias(name)


def frame_from_arrays(spark: SparkSession, arrays: dict[str, np.ndarray], schema: T.StructType) -> DataFrame:
    """A frame of `arrays` (one per field of `schema`, in its order), in at most a partition
    per core (`_driver_relation`)."""
    rows = len(arrays[schema.fields[0].name]) if schema.fields else 0
    if hasattr(DataFrame, "toArrow"):  # Spark 4 reads Arrow without pandas
        return frame_from_table(spark, pa.table({f.name: arrays[f.name] for f in schema.fields}), schema)
    import pandas as pd

    frame = pd.DataFrame({f.name: arrays[f.name] for f in schema.fields})
    return _driver_relation(spark, rows, lambda: spark.createDataFrame(frame, schema))


def frame_from_table(spark: SparkSession, table: pa.Table, schema: T.StructType) -> DataFrame:
    """A frame of `table`'s columns named by `schema`, as `frame_from_arrays` makes one."""
    # One chunk: Spark makes a partition of each chunk at least (a collected table's columns
    # come in a chunk per batch collected: 489 partitions for 1,000,000 rows).
    table = table.select([f.name for f in schema.fields]).combine_chunks()
    if hasattr(DataFrame, "toArrow"):  # Spark 4
        return _driver_relation(spark, table.num_rows, lambda: spark.createDataFrame(table, schema))
    frame = table.to_pandas()
    return _driver_relation(spark, table.num_rows, lambda: spark.createDataFrame(frame, schema))


# Below this many bytes Spark turns a frame made from Arrow data into a LocalRelation: the
# rows inside the plan itself, where every later analysis, optimization and cache lookup of
# every plan built on the frame walks, hashes and compares them. The labels of a million
# documents' graph (88,000 rows) left the cores idle for seconds between the guard's and
# write's jobs; as an RDD-backed relation the plan stays one node.
_LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"
# A frame made from Arrow (or pandas) data has a partition per batch of this many rows. The
# run sets it for text (runtime/sizing.py: 2,048 rows of long documents); a frame of ids
# from the driver in batches of 2,048 was 141 partitions at 288,000 rows, and every join,
# union and collect over it ran that many tasks (the guard's nearest step, 0.5 s more).
_ARROW_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
_MIN_PARTITION_ROWS = 10_000  # Spark's default batch: a small frame stays one partition


def ids_frame(spark: SparkSession, ids: np.ndarray, id_type: T.DataType) -> DataFrame:
    """A frame (_id) of `ids`, of `id_type`: the ids a query is to be joined to."""
    return frame_from_arrays(spark, {C.DOC_ID: ids}, T.StructType([T.StructField(C.DOC_ID, id_type, False)]))


def _driver_relation(spark: SparkSession, rows: int, make: Callable[[], DataFrame]) -> DataFrame:
    """`make()` (a createDataFrame from Arrow or pandas) with the local-relation threshold at
    0 while it runs, so the frame is backed by an RDD, not rows held in its plan; and with
    batches of at least `rows` / cores (and `_MIN_PARTITION_ROWS`), so it is at most a
    partition per core."""
    cores = max(spark.sparkContext.defaultParallelism, 1)
    per_partition = max(-(-rows // cores), _MIN_PARTITION_ROWS)
    settings = {_LOCAL_RELATION_THRESHOLD: "0", _ARROW_ROWS: str(per_partition)}
    before: dict[str, str | None] = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        return make()
    finally:
        for k, was in before.items():
            if was is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, was)
