"""Stage: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by its band key. Nearly every
bucket holds one document; the few shared ones give their candidate edges
(`kernels.lsh.bucket_edges`): all pairs of a bucket of up to `lsh.all_pairs_up_to`
documents, and a star from the smallest id of a larger one. A star edge needs only its
own row and the bucket's minimum, so a large bucket is never gathered in one place, and
a small one is gathered only once it is known to be small.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C


def band_rows(signed: DataFrame) -> DataFrame:
    """(_id, _bands) -> (_band_key: long, _id). Narrow.

    A band key already mixes in its band's index (`minhash.band_keys`), so the key alone
    names the bucket and the shuffle carries two longs per row, not three fields.
    """
    return signed.select(C.DOC_ID, F.explode(C.BAND_KEYS).alias(C.BAND_KEY))


def candidate_edges(signed: DataFrame, all_pairs_up_to: int) -> DataFrame:
    """(_id, _bands) -> distinct (src, dst) with src < dst.

    One shuffle of the band rows by key; an unordered window gives each row its bucket's
    size and smallest id (no sort by id, no list of the bucket), and the single-document
    buckets, nearly all of them, are dropped. Only the shared rows (2-3 % on the
    benchmark corpus) are sorted and reach Python. A final `distinct` merges a pair that
    shares several bands.

    Measured on 1M documents x 16 bands (2 cores): 8.1 s, as fast as the star-only window
    it replaced (7.3-7.8 s), and 13 s for a hash aggregation by key joined back to the
    band rows, whose map-side partial pass is wasted on keys that are nearly all distinct.
    """
    id_field = next(f for f in signed.schema.fields if f.name == C.DOC_ID)
    schema = T.StructType(
        [T.StructField(C.SRC, id_field.dataType, False), T.StructField(C.DST, id_field.dataType, False)]
    )
    bucket = Window.partitionBy(C.BAND_KEY)
    shared = (
        band_rows(signed)
        .select(
            C.BAND_KEY,
            C.DOC_ID,
            F.count(F.lit(1)).over(bucket).alias(C.BUCKET_SIZE),
            F.min(C.DOC_ID).over(bucket).alias(C.BUCKET_MIN),
        )
        .filter(F.col(C.BUCKET_SIZE) > 1)
        # The window left the rows clustered by key; this sorts only the shared rows.
        .sortWithinPartitions(C.BAND_KEY, C.DOC_ID)
    )

    def edges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.lsh import bucket_edges

        return bucket_edges(batches, all_pairs_up_to)

    return shared.mapInArrow(edges, schema).distinct()
