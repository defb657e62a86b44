"""Stage 3: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by its band key. A bucket
becomes a star: an edge from its smallest id to each other member. That is
linear in the bucket's size (all pairs of a 10,000-document bucket would be
50 million edges) and never gathers a bucket into one list. Stars lose no
connectivity: a pair that shares a bucket is joined through the centre, and the
verification of the centre's edges decides what stays joined.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
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

    Most buckets hold one document. A hash aggregation by band key finds the buckets
    with two or more (one shuffle, no sort of the band rows, which a window would need);
    those buckets, usually few, are broadcast back to the band rows to emit the star edges;
    a final `distinct` merges a pair that shares several bands.
    """
    rows = band_rows(signed)
    shared = (
        rows.groupBy(C.BAND_KEY)
        .agg(F.min(C.DOC_ID).alias(C.SRC), F.count(F.lit(1)).alias("_n"))
        .filter(F.col("_n") > 1)
        .drop("_n")
    )
    starred = rows.join(shared, C.BAND_KEY).select(C.SRC, F.col(C.DOC_ID).alias(C.DST))
    return starred.filter(F.col(C.SRC) != F.col(C.DST)).distinct()
