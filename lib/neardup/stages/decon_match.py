"""Stage of `neardup decontaminate`: every corpus document matched against the reference,
in one narrow pass over the text.

Each Python worker receives the reference once (a Spark broadcast of its Arrow IPC bytes,
parsed once per worker: `kernels.contamination.cached_reference`) and the corpus as Arrow batches
sized in bytes (runtime/sizing.py, as dedup's signing is). `kernels.contamination.decontaminate_batch`
does the work; only the documents that are not kept leave it, so nothing is shuffled and
the corpus never reaches the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels.contamination import NGRAM, REF, DeconParams


def _matcher(
    params: DeconParams, payload: Broadcast[bytes], key: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def match_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Imported on the executor: the kernels load their compiled code once per worker.
        from neardup.kernels.contamination import cached_reference, decontaminate_batch

        ref = cached_reference(key, lambda: payload.value)
        for batch in batches:
            yield decontaminate_batch(batch, ref, params)

    return match_batches


def match_documents(docs: DataFrame, params: DeconParams, payload: Broadcast[bytes], key: str) -> DataFrame:
    """docs (_id, _text, ...) -> (_id, _ref: int, reason: string, similarity: double,
    ngram: string): a row per document that cannot be processed (`_ref` null, the reason
    why) and a row per (document, reference item, reason) match (`kernels.contamination`). Narrow."""
    schema = T.StructType(
        [
            docs.schema[C.DOC_ID],
            T.StructField(REF, T.IntegerType(), True),
            T.StructField(C.REASON, T.StringType(), False),
            T.StructField(C.SIMILARITY, T.DoubleType(), True),
            T.StructField(NGRAM, T.StringType(), True),
        ]
    )
    return docs.select(C.DOC_ID, C.TEXT).mapInArrow(_matcher(params, payload, key), schema)
