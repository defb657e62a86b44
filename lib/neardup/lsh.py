"""Stage 3: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by (band, band key). A bucket
becomes a star: an edge from its smallest id to each other member. That is
linear in the bucket's size (all pairs of a 10,000-document bucket would be
50 million edges) and never gathers a bucket into one list. Stars lose no
connectivity: a pair that shares a bucket is joined through the centre, and the
verification of the centre's edges decides what stays joined.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup import columns as C


def band_rows(signed: DataFrame) -> DataFrame:
    """(_id, _bands) -> (_band: int, _band_key: long, _id). Narrow."""
    return signed.select(C.DOC_ID, F.posexplode(C.BAND_KEYS).alias(C.BAND, C.BAND_KEY))


def candidate_edges(signed: DataFrame) -> DataFrame:
    """(_id, _bands) -> distinct (src, dst) with src < dst: src is the smallest id of a bucket.

    One shuffle by (band, key) with a sort inside each partition for the window,
    then one shuffle for `distinct` (a pair sharing several bands is one edge).
    """
    bucket = Window.partitionBy(C.BAND, C.BAND_KEY)
    rows = band_rows(signed)
    starred = rows.select(F.min(C.DOC_ID).over(bucket).alias(C.SRC), F.col(C.DOC_ID).alias(C.DST))
    return starred.filter(F.col(C.SRC) != F.col(C.DST)).distinct()
