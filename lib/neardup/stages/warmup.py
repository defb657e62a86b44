"""A one-task job, not a stage of the list: it starts a Python worker and loads the compiled
code of the kernels the run's Python stages call (signing; exact verification), so that the
seconds this takes the first time in a worker pass while the input is read (local mode,
`harness._warm_python`) instead of inside the signing and verification stages.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from neardup.kernels.loading import load_kernels
from neardup.kernels.signatures import SignParams


def warm_up(
    spark: SparkSession, params: SignParams, keep_signatures: bool, verify_method: str, tasks: int
) -> DataFrame:
    """A frame of `tasks` rows, (n: the rows the kernels returned), one per task: the
    made-up documents signed (with signatures kept or not, as the run signs), and with
    `verify_method` exact, the pair of them scored as verification scores a group. With a
    task per slot, every worker the run's Python stages take is warm (on the sample, a
    second cold worker cost the first Python stages about a second)."""
    schema = T.StructType([T.StructField("n", T.LongType(), False)])
    exact = verify_method == "exact"

    def warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = load_kernels(params, keep_signatures, exact)
        for batch in batches:
            yield pa.record_batch({"n": pa.array([n] * len(batch), pa.int64())})

    return spark.range(tasks, numPartitions=tasks).mapInArrow(warm, schema)
