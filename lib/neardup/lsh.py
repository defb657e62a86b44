"""Stage 3: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by its band key. A bucket
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
    """(_id, _bands) -> (_band_key: long, _id). Narrow.

    A band key already mixes in its band's index (`minhash.band_keys`), so the key alone
    names the bucket and the shuffle carries two longs per row, not three fields.
    """
    return signed.select(C.DOC_ID, F.explode(C.BAND_KEYS).alias(C.BAND_KEY))


def candidate_edges(signed: DataFrame) -> DataFrame:
    """(_id, _bands) -> distinct (src, dst) with src < dst: src is the smallest id of a bucket.

    One shuffle of the band rows by key; the smallest id of each bucket comes from an
    unordered window (a running minimum over the bucket's rows as they stream by, no
    sort by id and no list of the bucket); a member other than the minimum is an edge
    to it, and a single-member bucket (most of them) yields none. A final `distinct`
    merges a pair that shares several bands.

    Measured on 1M documents x 16 bands (2 cores): 8 s, against 18 s for a hash
    aggregation by key followed by a join of the shared buckets back to the band rows;
    the aggregation alone took 13 s, its map-side partial pass being wasted on keys
    that are nearly all distinct.
    """
    bucket = Window.partitionBy(C.BAND_KEY)
    rows = band_rows(signed)
    starred = rows.select(F.min(C.DOC_ID).over(bucket).alias(C.SRC), F.col(C.DOC_ID).alias(C.DST))
    return starred.filter(F.col(C.SRC) != F.col(C.DST)).distinct()
