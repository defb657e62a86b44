"""Stage: LSH buckets -> candidate edges.

Every document lands in one bucket per band, keyed by its band key. Nearly every
bucket holds one document; the few shared ones give their candidate edges
(`kernels.buckets.bucket_edges`): all pairs of a bucket of up to `lsh.all_pairs_up_to`
documents, and a star from the smallest id of a larger one. A star edge needs only its
own row and the bucket's minimum, so a large bucket is never gathered in one place, and
a small one is gathered only once it is known to be small.

The band rows are shuffled in blocks (kernels/band_blocks.py): each task's keys split by
destination in Python and sent as a few binary rows, each destination's blocks read whole
by one task that finds its shared keys with a numpy sort. A destination's rows are what
one Python worker holds, so their number grows with the rows (`destinations`), and a
bucket of up to `split_over` rows is held whole in one.

A page copied a million times would still put a million rows per band in one
destination. So buckets of more than `split_over` rows are found first (stages/skew.py: a
sample of the documents), their size and minimum counted by an aggregation combined in
every task before its shuffle; their rows stay out of the blocks, and their star edges
come from each row and the broadcast minimum, with no shuffle. The edges are the same
whichever buckets are found.

When the documents are few enough for the driver (`on_driver`: the broadcast bound), none
of this runs: their ids and band keys are collected, and the driver finds every band's
buckets with a sort (kernels/band_edges.py; the same edges).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.kernels.band_blocks import BLOCK, DEST, balanced_labels
from neardup.kernels.band_edges import band_edges
from neardup.kernels.signatures import band_keys_of
from neardup.stages import skew
from neardup.stages.driver_frames import DRIVER_ID_TYPES, collect_table, frame_from_table

log = logging.getLogger("neardup")
# A destination holds about this much of the band rows, and a Python worker one destination
# (with its sort, about three times that). A string id is taken to be this long.
DESTINATION_BYTES = 16 << 20
STRING_ID_BYTES = 64
_BLOCK_SCHEMA = T.StructType(
    [T.StructField(DEST, T.IntegerType(), False), T.StructField(BLOCK, T.BinaryType(), False)]
)
# A document's smallest centre: the least minimum of the large buckets it is in.
_FIRST = "_first"
# Which star edges a document keeps (`_per_document`): in the candidates' fingerprint, so
# candidates kept under _work/ by another rule are not reused.
STAR_EDGES = "smallest centre, further centres linked"
# What the driver collects to find the candidates itself (`_on_driver`): each document's id
# and band keys (160 MB for 1,000,000 documents with 18 bands), held at once in its JVM's
# heap and its Python's.
DRIVER_KEY_BYTES = 256 << 20


def band_rows(signed: DataFrame, id_col: str = C.DOC_ID, with_band: bool = False) -> DataFrame:
    """(id_col, _bands) -> (id_col[, band: int], _band_key: long), a row per band key (the
    band's index with `with_band`). Narrow.

    A band key already mixes in its band's index (`minhash.band_keys`), so the key alone
    names the bucket. `_bands` is binary (kernels/signatures.band_keys_of): Python reads
    the keys out, where Spark would need a cast per key.
    """
    id_field = next(f for f in signed.schema.fields if f.name == id_col)
    band = [T.StructField(C.BAND, T.IntegerType(), False)] if with_band else []
    schema = T.StructType([id_field, *band, T.StructField(C.BAND_KEY, T.LongType(), False)])

    def explode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.band_blocks import band_key_rows

        return band_key_rows(batches, id_col, with_band)

    return signed.select(id_col, C.BAND_KEYS).mapInArrow(explode, schema)


@dataclass(frozen=True)
class Held:
    """Documents' ids and band keys on the driver: rows `rows` of `keys` (None: every row,
    in order) are the documents of `ids`."""

    ids: pa.Array
    keys: np.ndarray
    rows: np.ndarray | None


@dataclass(frozen=True)
class Candidates:
    edges: DataFrame  # distinct (src, dst), src < dst: what verification scores
    # (src, dst): every star edge before `_per_document` drops some, src the centre of a
    # large bucket holding dst. A centre and the documents it is centre to form a star
    # group, which stages/stars.py resolves further when verification splits it.
    stars: DataFrame
    # Where the candidates were found on the driver with no star edge: each src's pairs,
    # counted (what verification's shuffle gathers), so verification needs no sample.
    known: skew.Counted | None = None


def destinations(rows: int, partitions: int, id_bytes: int = 8) -> int:
    """How many destinations (and tasks: one each) the band shuffle's `rows` go to: at
    least the shuffle's `partitions`, and enough that one holds about DESTINATION_BYTES of
    (key, id) rows, a key 8 bytes and an id `id_bytes`."""
    return max(partitions, math.ceil(rows * (8 + id_bytes) / DESTINATION_BYTES))


def keys_fit_driver(documents: int, bands: int, id_field: T.StructField, extra: int = 0) -> bool:
    """Whether `documents` ids and band keys (and `extra` bytes each) are within
    DRIVER_KEY_BYTES, ids of a type the driver takes (driver_frames.DRIVER_ID_TYPES); the
    caller also asks the broadcast bound."""
    driver_ids = isinstance(id_field.dataType, DRIVER_ID_TYPES)
    return driver_ids and documents * (8 * bands + _id_bytes(id_field) + extra) <= DRIVER_KEY_BYTES


def _id_bytes(id_field: T.StructField) -> int:
    """Bytes an id takes in a block: 8 for an integer, and a string's guessed long (a URL)."""
    integral = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)
    return 8 if isinstance(id_field.dataType, integral) else STRING_ID_BYTES


def candidate_edges(
    signed: DataFrame,
    all_pairs_up_to: int,
    split_over: skew.Threshold | None = None,
    keep: Callable[[DataFrame], DataFrame] | None = None,
    rows: int = 0,
    on_driver: bool = False,
    held: Held | None = None,
) -> Candidates:
    """(_id, _bands) -> distinct (src, dst) with src < dst, and the star groups.

    One shuffle of the band rows in blocks by destination (kernels/band_blocks.py, `rows`
    of them at most: what sizes the destinations); each task finds its destinations' shared
    buckets with a numpy sort, and only their rows reach `bucket_edges`. A `distinct`
    merges a pair that shares several bands, and only some of a document's star edges are
    kept (`_per_document`).

    On the 1M benchmark corpus (17 million band rows, 2 cores) the stage took 9.8 s where
    the window over Spark rows by key it replaced took 17.4 s (sorting and windowing every
    row in the JVM to find the 2-3 % shared), the same outputs; a hash aggregation by key
    joined back to the band rows took 13 s against the window's 8.1 s before that. The
    buckets of more than `split_over` rows (None: none) are found from a sample first and
    counted apart (`_large_buckets`); their rows never enter the shuffle.

    keep: persist the distinct candidates, which the three parts of `_per_document` and
    the star groups read (without it, each part may run the shuffle and the kernel again:
    97 s against 28 s on the skewed benchmark corpus, whose large buckets make a plan Spark
    did not reuse). With it, a take (whose first job computes them) asks whether there is
    any star edge; without one the candidates are the distinct pairs as they are.

    on_driver: the ids and band keys are collected and the distinct pairs found on the
    driver (`_on_driver`): for documents within the broadcast bound whose keys fit
    (`keys_fit_driver`). `split_over` and `rows` are not used. held: the documents' ids and
    keys, already on the driver (stages/exact.py's collect): no collect.
    """
    id_field = next(f for f in signed.schema.fields if f.name == C.DOC_ID)
    schema = T.StructType(
        [
            T.StructField(C.SRC, id_field.dataType, False),
            T.StructField(C.DST, id_field.dataType, False),
            T.StructField(C.STAR, T.BooleanType(), False),
        ]
    )
    spark = signed.sparkSession
    if on_driver or held is not None:
        return _on_driver(signed, all_pairs_up_to, schema, keep, held)
    large = None if split_over is None else _large_buckets(signed, skew.threshold(split_over))
    skip = None if large is None else np.array(sorted(r[0] for r in large), dtype=np.int64)
    dests = destinations(rows, skew.shuffle_partitions(spark), _id_bytes(id_field))
    # One destination a task: what a Python worker holds is one destination's rows.
    labels = balanced_labels(dests, dests)

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.band_blocks import band_blocks

        return band_blocks(batches, dests, labels, skip)

    def edges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.kernels.band_blocks import destination_buckets
        from neardup.kernels.buckets import bucket_edges

        for shared in destination_buckets(batches):
            yield from bucket_edges(shared.to_batches(), all_pairs_up_to)

    blocks = signed.select(C.DOC_ID, C.BAND_KEYS).mapInArrow(split, _BLOCK_SCHEMA)
    # Each label hashes to a partition of its own (a fixed count, which adaptive execution
    # does not coalesce). The sort of the few block rows keeps the edges right whatever the
    # hash does: two destinations in one task are read one after the other.
    found = blocks.repartition(dests, DEST).sortWithinPartitions(DEST).mapInArrow(edges, schema)
    if large is not None:
        found = found.unionByName(_large_star_edges(signed, large, id_field))
    merged = found.groupBy(C.SRC, C.DST).agg(F.bool_and(C.STAR).alias(C.STAR))
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


def _on_driver(
    signed: DataFrame,
    all_pairs_up_to: int,
    schema: T.StructType,
    keep: Callable[[DataFrame], DataFrame] | None,
    held: Held | None = None,
) -> Candidates:
    """`candidate_edges` with the distinct pairs found on the driver: one collect of the
    ids and band keys (a document's keys are one binary value) unless `held`, every band
    sorted there (kernels/band_edges.py, a thread per core: the executors wait meanwhile),
    and the pairs made a frame again. On the 1M benchmark corpus: 1,000,000 documents'
    keys (160 MB collected) and 18 bands sorted in about 1 s, where the shuffle in blocks,
    its sampling for large buckets and its jobs took 5-6 s."""
    if held is None:
        table = collect_table(signed.select(C.DOC_ID, C.BAND_KEYS))
        rows, keys = band_keys_of(table.column(C.BAND_KEYS))
        held = Held(table.column(C.DOC_ID).combine_chunks().take(pa.array(rows)), keys, None)
        del table
    found = band_edges(held.ids, held.keys, all_pairs_up_to, min(os.cpu_count() or 1, 4), held.rows)
    merged = frame_from_table(signed.sparkSession, found, schema)
    stars = merged.filter(F.col(C.STAR)).select(C.SRC, C.DST)
    if not pc.any(found.column(C.STAR)).as_py():
        src = found.column(C.SRC).to_numpy()
        return Candidates(merged.select(C.SRC, C.DST), stars, skew.counted(src))
    if keep is not None:
        merged = keep(merged)
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


def _large_buckets(signed: DataFrame, over: int) -> list[Row] | None:
    """(_band_key, _bucket_size, _bucket_min) of the buckets of more than `over` rows, or
    None if there are none; few (a sample finds them).

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
    log.info(
        "candidates: %d buckets of more than %d documents (the largest %d) kept out of the shuffle",
        len(counted),
        over,
        max(int(r[C.BUCKET_SIZE]) for r in counted),
    )
    return counted


def _large_star_edges(signed: DataFrame, large: list[Row], id_field: T.StructField) -> DataFrame:
    """(src, dst, _star) star edges of the large buckets: from each of their rows to the
    bucket's minimum, broadcast; no shuffle. The minimum itself has no edge."""
    schema = T.StructType(
        [
            T.StructField(C.BAND_KEY, T.LongType(), False),
            T.StructField(C.BUCKET_MIN, id_field.dataType, False),
        ]
    )
    minima = signed.sparkSession.createDataFrame([(r[C.BAND_KEY], r[C.BUCKET_MIN]) for r in large], schema)
    return (
        band_rows(signed)
        .join(F.broadcast(minima), C.BAND_KEY)
        .filter(F.col(C.DOC_ID) != F.col(C.BUCKET_MIN))
        .select(F.col(C.BUCKET_MIN).alias(C.SRC), F.col(C.DOC_ID).alias(C.DST), F.lit(True).alias(C.STAR))
    )
