"""Keys too large for one task, found before the shuffle that would gather them.

A shuffle by key puts all rows of a key in one task: an LSH bucket of a boilerplate page
copied millions of times (stages/candidates.py), a star of candidate edges around its centre
(stages/verify.py). The stages spread such keys over several tasks; this module finds them
and sizes the pieces. Finding them costs a scan and the aggregation of a small sample, never
a count of every key: the rows are sampled by a stable hash of another column (the document
id), so a key of `over` rows shows about `SAMPLE_HITS` times whatever the input's size, and
the same input always gives the same keys. Which keys are spread decides only where rows
are processed, never the output, so a key the sample misses (or a small one it names) is
still handled correctly, only in one task.

`split_threshold` gives the size above which a key is spread: the configured one, or a
task's share of the rows (rows / spark.sql.shuffle.partitions, `TaskShare`), so that no key
adds more than an average task's worth to the task it lands in; a shuffle of fewer than
MIN_SPREAD_ROWS rows spreads nothing unless configured. Where only a bound on the
rows is known (the pairs an over-merge guard round scores), the sample's own estimate of
them lowers it.

Where the caller has counted every key's rows itself (the star rounds, the guard's rounds
and its nearest step, on the driver), `counted` takes them as they are: no sampling job, so
no MIN_SPREAD_ROWS floor, and a group over a task's share is spread however small the
shuffle. Such a shuffle also runs in fewer tasks where it is small (`counted_partitions`):
at 1,000,000 documents the stars' 8,333 pairs, a few hundred groups hashed to 200 tasks of
about 45 rows, left one task 4.4x the median, which no spreading of one key removes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup.kernels import id_arrays

# Expected sampled rows of a key of exactly `over` rows: a key of twice that size is missed
# with a probability below 1e-6 (Poisson), so the sample finds every key worth spreading.
SAMPLE_HITS = 32
# The most keys spread in one shuffle (the largest ones); the rest run as before. Bounds what
# the driver collects and broadcasts.
MAX_KEYS = 100_000
# A derived threshold is at least this: below it a key is cheap wherever it lands.
MIN_DERIVED = 64
# A spread key goes in pieces of at most over / PIECES_PER_THRESHOLD rows, each to the task its
# (key, piece) hashes to: small pieces, so several landing in one task stay within a task's share.
PIECES_PER_THRESHOLD = 4
# A shuffle moving fewer rows than this is spread only where the config says: it takes
# seconds in all, so no key in it can hold the other tasks up by more than the sampling job
# that would find it costs (a job per stage that a small run would pay for nothing). Not
# more: at 1,000,000, the guard's scoring of the skew benchmark's corpus (a bound of 857,600
# rows) held a star of 100,000 pairs in one task, 200x the median task.
MIN_SPREAD_ROWS = 250_000
# ... unless a key is known to hold this many rows, whatever the rest: the guard knows its
# largest star (the largest cluster), which can be most of a shuffle under MIN_SPREAD_ROWS.
MIN_SPREAD_KEY = 50_000
# A shuffle whose groups the caller counted runs in tasks of at least this many rows where it
# has fewer than spark.sql.shuffle.partitions such tasks' worth, but never in fewer tasks
# than the cluster has cores: a few hundred groups hashed to 200 tasks of 45 rows each left
# one task 4.4x the median (the stars' 8,333 pairs at 1,000,000 documents), and a task of a
# few rows costs more to schedule than to run. Its task count is fixed, so adaptive
# execution does not coalesce it; rows of verification are texts (2 KB on average there),
# so 2,048 of them are a few MB.
MIN_TASK_ROWS = 2_048
# More pieces than tasks buy nothing; this bounds them (and keeps a piece's number an int).
MAX_PIECES = 1 << 16
_HASH_SPACE = 1 << 20
_SAMPLED = "_sampled"
_TOTAL = "_total"


@dataclass(frozen=True)
class TaskShare:
    """A derived threshold: a task's share of the rows a shuffle moves, at least `least`."""

    rows: int  # the rows the shuffle moves, or a bound on them
    partitions: int
    least: int

    def over(self, rows: int | None = None) -> int:
        """The threshold for `rows` rows (an estimate below the bound), else for the bound."""
        n = self.rows if rows is None else min(rows, self.rows)
        return max(self.least, math.ceil(n / max(1, self.partitions)))


Threshold = int | TaskShare


@dataclass(frozen=True, eq=False)
class Counted:
    """The groups of a shuffle counted exactly by the caller: each key with its pairs."""

    keys: np.ndarray
    rows: np.ndarray  # int64

    @property
    def total(self) -> int:
        """The rows the shuffle moves: one per pair, and one per group (its source's; one
        per part of a group cut in parts, so a few more there)."""
        return int(self.rows.sum()) + len(self.keys)

    def over(self, threshold: int) -> list[tuple[Any, int]]:
        """(key, pairs) of the groups of more than `threshold` pairs, as Python values."""
        big = self.rows > threshold
        return list(zip(self.keys[big].tolist(), self.rows[big].tolist(), strict=True))


def counted(keys: np.ndarray) -> Counted:
    """The group key of each pair a shuffle gathers (the src of each pair verification
    scores), counted."""
    found, _, n = id_arrays.unique(keys)
    return Counted(found, n)


def shuffle_partitions(spark: SparkSession) -> int:
    """spark.sql.shuffle.partitions as a number: Spark's 200 where it is unset or not a
    number (Databricks accepts `auto`, leaving the count to adaptive execution)."""
    value = str(spark.conf.get("spark.sql.shuffle.partitions") or "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 200


def counted_partitions(spark: SparkSession, known: Counted) -> int:
    """The tasks of a shuffle whose rows the caller counted: spark.sql.shuffle.partitions, or
    fewer where that would leave a task fewer than MIN_TASK_ROWS rows, but at least one per
    core (Spark's default parallelism)."""
    partitions = shuffle_partitions(spark)
    cores = spark.sparkContext.defaultParallelism
    return max(1, min(partitions, max(cores, known.total // MIN_TASK_ROWS)))


def counted_threshold(spark: SparkSession, configured: int | None, known: Counted) -> int:
    """`configured`, or a task's share of the rows `known` counts over its tasks
    (`counted_partitions`), at least MIN_DERIVED."""
    if configured is not None:
        return configured
    return max(MIN_DERIVED, math.ceil(known.total / counted_partitions(spark, known)))


def split_threshold(
    spark: SparkSession,
    configured: int | None,
    rows: int,
    floor: int = 1,
    largest: int = 0,
    known: Counted | None = None,
) -> Threshold | None:
    """`configured`, or a task's share of `rows` (what the shuffle moves, or a bound on it)
    over the shuffle partitions, at least MIN_DERIVED and `floor`; None (spread nothing)
    when not configured, `rows` is below MIN_SPREAD_ROWS and `largest` (the rows of the
    largest key, where known) below MIN_SPREAD_KEY. With `known`, the caller's exact counts,
    `counted_threshold` (`rows` and `largest` unused)."""
    if known is not None:
        return counted_threshold(spark, configured, known)
    if configured is not None:
        return configured
    if rows < MIN_SPREAD_ROWS and largest < MIN_SPREAD_KEY:
        return None
    partitions = shuffle_partitions(spark)
    return TaskShare(rows, partitions, max(floor, MIN_DERIVED))


def threshold(split: Threshold, rows: int | None = None) -> int:
    """The threshold itself (a derived one for `rows` rows, if known)."""
    return split if isinstance(split, int) else split.over(rows)


def least(split: Threshold) -> int:
    """The smallest threshold `split` can come to, whatever the rows."""
    return split if isinstance(split, int) else split.least


def sample_rate(over: int) -> float:
    """The fraction of rows sampled to find keys of more than `over` rows."""
    return min(1.0, SAMPLE_HITS / over)


def in_sample(column: str, rate: float) -> Column:
    """True for a stable `rate` share of the values of `column` (Spark's xxhash64)."""
    if rate >= 1.0:
        return F.lit(True)
    cut = math.ceil(rate * _HASH_SPACE)
    return F.pmod(F.xxhash64(F.col(column)), F.lit(_HASH_SPACE)) < F.lit(cut)


def frequent(
    sampled: DataFrame, key: str, rate: float, over: float, total: bool = False
) -> tuple[list[tuple[Any, int]], int]:
    """(key, estimated rows) of the keys of `sampled` (a `rate` sample of the rows) estimated
    at more than `over` rows, largest first (ties by key), at most MAX_KEYS; and with `total`
    the rows the sample estimates in all (else, and when no key is found, 0). One query: the
    sample's aggregation by key, combined in each task before its shuffle (and its sum)."""
    counts = sampled.groupBy(key).agg(F.count(F.lit(1)).alias(_SAMPLED))
    found = counts.filter(F.col(_SAMPLED) > over * rate)
    if total:
        found = found.crossJoin(F.broadcast(counts.agg(F.sum(_SAMPLED).alias(_TOTAL))))
    rows = found.orderBy(F.col(_SAMPLED).desc(), F.col(key)).limit(MAX_KEYS).collect()
    estimate = round(rows[0][_TOTAL] / rate) if total and rows else 0
    return [(row[key], round(row[_SAMPLED] / rate)) for row in rows], estimate


def pieces(rows: int, over: int) -> int:
    """How many pieces a key of `rows` rows is spread in (see PIECES_PER_THRESHOLD)."""
    return min(MAX_PIECES, max(1, math.ceil(PIECES_PER_THRESHOLD * rows / over)))
