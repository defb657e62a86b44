"""Stage: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by its band key. Nearly every
bucket holds one document; the few shared ones give their candidate edges
(`kernels.buckets.bucket_edges`): all pairs of a bucket of up to `lsh.all_pairs_up_to`
documents, and a star from the smallest id of a larger one. A star edge needs only its
own row and the bucket's minimum, so a large bucket is never gathered in one place, and
a small one is gathered only once it is known to be small.

A bucket's size and minimum still come from a window by band key, which holds the whole
bucket in one task: a page copied a million times puts a million rows per band there. So
buckets of more than `split_over` rows are found first (stages/skew.py: a sample of the
documents), their size and minimum counted by an aggregation combined in every task
before its shuffle, and their rows spread over several tasks of the window by a salt (a
hash of the id), with the exact size and minimum broadcast to them. The edges are the same
whichever buckets are spread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.stages import skew

log = logging.getLogger("neardup")
# A large bucket's rows: their piece, how many pieces, the whole bucket's size and minimum.
_SALT = "_salt"
_PIECES = "_pieces"
_LARGE_SIZE = "_large_size"
_LARGE_MIN = "_large_min"
# A document's smallest centre: the least minimum of the large buckets it is in.
_FIRST = "_first"
# Which star edges a document keeps (`_per_document`): in the candidates' fingerprint, so
# candidates kept under _work/ by another rule are not reused.
STAR_EDGES = "smallest centre, further centres linked"


def band_rows(signed: DataFrame) -> DataFrame:
    """(_id, _bands) -> (_band_key: long, _id). Narrow.

    A band key already mixes in its band's index (`minhash.band_keys`), so the key alone
    names the bucket and the shuffle carries two longs per row, not three fields.
    """
    return signed.select(C.DOC_ID, F.explode(C.BAND_KEYS).alias(C.BAND_KEY))


@dataclass(frozen=True)
class Candidates:
    edges: DataFrame  # distinct (src, dst), src < dst: what verification scores
    # (src, dst): every star edge before `_per_document` drops some, src the centre of a
    # large bucket holding dst. A centre and the documents it is centre to form a star
    # group, which stages/stars.py resolves further when verification splits it.
    stars: DataFrame


def candidate_edges(
    signed: DataFrame,
    all_pairs_up_to: int,
    split_over: skew.Threshold | None = None,
    keep: Callable[[DataFrame], DataFrame] | None = None,
) -> Candidates:
    """(_id, _bands) -> distinct (src, dst) with src < dst, and the star groups.

    One shuffle of the band rows by key; an unordered window gives each row its bucket's
    size and smallest id (no sort by id, no list of the bucket), and the single-document
    buckets, nearly all of them, are dropped. Only the shared rows (2-3 % on the
    benchmark corpus) are sorted and reach Python. A `distinct` merges a pair that shares
    several bands, and only some of a document's star edges are kept (`_per_document`).

    Measured on 1M documents x 16 bands (2 cores): 8.1 s, as fast as the star-only window
    it replaced (7.3-7.8 s), and 13 s for a hash aggregation by key joined back to the
    band rows, whose map-side partial pass is wasted on keys that are nearly all distinct.
    Hence the buckets of more than `split_over` rows (None: none) are found from a sample
    first, and only theirs are counted apart (`_large_buckets`); without any, the plan is
    the window alone.

    keep: persist the distinct candidates, which the three parts of `_per_document` and
    the star groups read (without it, each part may run the window and the kernel again:
    97 s against 28 s on the skewed benchmark corpus, whose large buckets make a plan Spark
    did not reuse). With it, a take (whose first job computes them) asks whether there is
    any star edge; without one the candidates are the distinct pairs as they are.
    """
    id_field = next(f for f in signed.schema.fields if f.name == C.DOC_ID)
    schema = T.StructType(
        [
            T.StructField(C.SRC, id_field.dataType, False),
            T.StructField(C.DST, id_field.dataType, False),
            T.StructField(C.STAR, T.BooleanType(), False),
        ]
    )
    rows = band_rows(signed)
    large = None if split_over is None else _large_buckets(signed, skew.threshold(split_over), id_field)
    if large is None:
        bucket = Window.partitionBy(C.BAND_KEY)
        size, smallest = F.count(F.lit(1)).over(bucket), F.min(C.DOC_ID).over(bucket)
    else:
        # A large bucket's rows go to the window in pieces (salted by id); their size and
        # minimum are the whole bucket's, broadcast. Other rows have salt 0: whole buckets.
        rows = rows.join(F.broadcast(large), C.BAND_KEY, "left").select(
            C.BAND_KEY,
            C.DOC_ID,
            F.coalesce(F.pmod(F.xxhash64(C.DOC_ID), F.col(_PIECES)), F.lit(0)).alias(_SALT),
            F.col(C.BUCKET_SIZE).alias(_LARGE_SIZE),
            F.col(C.BUCKET_MIN).alias(_LARGE_MIN),
        )
        bucket = Window.partitionBy(C.BAND_KEY, _SALT)
        size = F.coalesce(F.col(_LARGE_SIZE), F.count(F.lit(1)).over(bucket))
        smallest = F.coalesce(F.col(_LARGE_MIN), F.min(C.DOC_ID).over(bucket))
    shared = (
        rows.select(C.BAND_KEY, C.DOC_ID, size.alias(C.BUCKET_SIZE), smallest.alias(C.BUCKET_MIN))
        .filter(F.col(C.BUCKET_SIZE) > 1)
        # The window left the rows clustered by key; this sorts only the shared rows.
        .sortWithinPartitions(C.BAND_KEY, C.DOC_ID)
    )

    def edges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.buckets import bucket_edges

        return bucket_edges(batches, all_pairs_up_to)

    merged = shared.mapInArrow(edges, schema).groupBy(C.SRC, C.DST).agg(F.bool_and(C.STAR).alias(C.STAR))
    if keep is not None:
        merged = keep(merged)
    stars = merged.filter(F.col(C.STAR)).select(C.SRC, C.DST)
    if keep is not None and stars.isEmpty():
        # No bucket of more than all_pairs_up_to documents: every candidate is a small
        # bucket's pair, and `_per_document`'s joins would run over empty frames (eight
        # jobs, about 1 s on the 1M benchmark). A take asks, over the kept candidates (a few
        # short jobs: Spark reads more partitions each time it finds none).
        return Candidates(merged.select(C.SRC, C.DST), stars)
    return Candidates(_per_document(merged), stars)


def _per_document(merged: DataFrame) -> DataFrame:
    """(src, dst, _star), distinct pairs -> distinct (src, dst): the small buckets' pairs,
    and of a document's star edges the one to its smallest centre (c1), plus one star edge
    per further pair of centres.

    A document in a large bucket in several bands has a star edge to each of their minima,
    its centres: on the benchmark's skewed corpus (100,000 copies of one page and 1,000
    clusters of 100) about 4.7 each, 85 % of all candidates, and each is verified.
    Connected, those edges join every centre of a document to c1 through it, and one
    document does that as well as all of them. So of the edges to a further centre c, only
    (c, w) is kept, w the smallest document with both c1 and c (grouped by the pair of
    centres: a few rows per large bucket, however large). Were every candidate verified,
    the components would be the same, and the kept edges are a subset of the star edges.
    But fewer paths are verified: a document whose edge to c1 fails is no longer saved by
    an edge to a further centre, and a further centre hangs on its one link (c, w) and w's
    edge to c1, where before every document with both joined them. On the skew benchmark
    the clusters were as right as before (F1 1.0000). Real text is not so kind: a large
    bucket's smallest id may be a long file that quotes the licence its other members are
    copies of, so every copy's one edge fails (recall at J >= 0.9 was 0.62 on 29,491
    licence and package files). Verification splits such a star group, and stages/stars.py gives
    it further centres until it is whole.

    A pair found both in a small bucket and as a star edge counts as a pair (kept whatever
    the stars), so the three sets are disjoint: no `distinct` after them. Every shuffle but
    the first (the `distinct` of all candidates, as before) moves star edges alone.
    """
    pairs = merged.filter(~F.col(C.STAR)).select(C.SRC, C.DST)
    stars = merged.filter(F.col(C.STAR)).select(C.SRC, C.DST)
    first = stars.groupBy(C.DST).agg(F.min(C.SRC).alias(_FIRST))
    links = (
        stars.join(first, C.DST)
        .filter(F.col(C.SRC) != F.col(_FIRST))
        .groupBy(_FIRST, C.SRC)
        .agg(F.min(C.DST).alias(C.DST))
    )
    return pairs.unionByName(first.select(F.col(_FIRST).alias(C.SRC), C.DST)).unionByName(
        links.select(C.SRC, C.DST)
    )


def _large_buckets(signed: DataFrame, over: int, id_field: T.StructField) -> DataFrame | None:
    """(_band_key, _bucket_size, _bucket_min, _pieces) of the buckets of more than `over`
    rows, or None if there are none; small, for a broadcast.

    Two jobs: the sample's candidates (keys estimated at over / 2 rows or more), then their
    exact sizes and minima from an aggregation of their rows alone, combined in every task
    before the shuffle, so no task holds a whole bucket. A large bucket is a star (`over` is
    at least lsh.all_pairs_up_to), so its edges need only each row, the size and the minimum.
    """
    rate = skew.sample_rate(over)
    found, _ = skew.frequent(
        band_rows(signed.filter(skew.in_sample(C.DOC_ID, rate))), C.BAND_KEY, rate, over / 2
    )
    if not found:
        return None
    spark = signed.sparkSession
    keys = spark.createDataFrame(
        [(k,) for k, _ in found], T.StructType([T.StructField(C.BAND_KEY, T.LongType())])
    )
    counted = (
        band_rows(signed)
        .join(F.broadcast(keys), C.BAND_KEY, "left_semi")
        .groupBy(C.BAND_KEY)
        .agg(F.count(F.lit(1)).alias(C.BUCKET_SIZE), F.min(C.DOC_ID).alias(C.BUCKET_MIN))
        .filter(F.col(C.BUCKET_SIZE) > over)
        .collect()
    )
    if not counted:
        return None
    sizes = [int(r[C.BUCKET_SIZE]) for r in counted]
    log.info(
        "candidates: %d buckets of more than %d documents (the largest %d) spread over tasks",
        len(counted),
        over,
        max(sizes),
    )
    schema = T.StructType(
        [
            T.StructField(C.BAND_KEY, T.LongType(), False),
            T.StructField(C.BUCKET_SIZE, T.LongType(), False),
            T.StructField(C.BUCKET_MIN, id_field.dataType, False),
            T.StructField(_PIECES, T.LongType(), False),
        ]
    )
    return spark.createDataFrame(
        [
            (r[C.BAND_KEY], n, r[C.BUCKET_MIN], skew.pieces(n, over))
            for r, n in zip(counted, sizes, strict=True)
        ],
        schema,
    )
