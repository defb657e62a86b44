"""Stage of `neardup tune --input`: a deterministic sample of the documents, on the driver.

One `mapInArrow` pass gives every document dedup would sign its sample key
(`kernels.measure.sample_keys`: a one-slot MinHash under a seed of its own) and its size;
the `size` smallest (key, id) are kept (a top-k: each task keeps its own `size` rows, no
shuffle of the corpus), then as many of them, in that order, as fit in `max_bytes` of
text. Only those texts are read back (a broadcast join on their ids) and collected, so the
driver holds at most `max_bytes` of text whatever the corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels.signatures import SignParams

_CUMULATIVE = "_cumulative"


@dataclass(frozen=True)
class Sample:
    texts: pa.ChunkedArray  # in sample order (key, then id)
    smallest: int  # documents dedup would sign with the `size` smallest keys (all, if fewer)
    text_bytes: int  # UTF-8 bytes of the sample's texts


def _keyer(p: SignParams) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def key_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.measure import sample_keys

        for batch in batches:
            yield sample_keys(batch, p)

    return key_batches


def collect_arrow(df: DataFrame) -> pa.Table:
    frame: Any = df
    if hasattr(frame, "toArrow"):  # Spark 4
        return frame.toArrow()
    return pa.Table.from_batches(frame._collect_as_arrow())  # Spark 3.5


def draw_sample(docs: DataFrame, params: SignParams, size: int, max_bytes: int) -> Sample:
    """docs (_id, _text, ...) -> the sample of the module docstring."""
    schema = T.StructType(
        [
            docs.schema[C.DOC_ID],
            T.StructField(C.SAMPLE_KEY, T.LongType(), False),
            T.StructField(C.BYTES, T.LongType(), False),
        ]
    )
    keyed = docs.select(C.DOC_ID, C.TEXT).mapInArrow(_keyer(params), schema)
    order = [F.col(C.SAMPLE_KEY), F.col(C.DOC_ID)]
    # The window runs over the `size` rows of the top-k only (one partition of them).
    running = Window.orderBy(*order).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    top = (
        keyed.orderBy(*order)
        .limit(size)
        .withColumn(_CUMULATIVE, F.sum(C.BYTES).over(running))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        totals = top.agg(
            F.count(F.lit(1)).alias("smallest"),
            F.count(F.when(F.col(_CUMULATIVE) <= max_bytes, 1)).alias("chosen"),
            F.max(F.when(F.col(_CUMULATIVE) <= max_bytes, F.col(_CUMULATIVE))).alias("bytes"),
        ).first()
        chosen = top.filter(F.col(_CUMULATIVE) <= max_bytes).select(C.DOC_ID, C.SAMPLE_KEY)
        texts = collect_arrow(
            docs.select(C.DOC_ID, C.TEXT).join(F.broadcast(chosen), C.DOC_ID).orderBy(*order).select(C.TEXT)
        ).column(0)
    finally:
        top.unpersist()
    assert totals is not None
    return Sample(texts, int(totals["smallest"]), int(totals["bytes"] or 0))
