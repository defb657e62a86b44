"""Batch sizes for this run, from the input's bytes per row and the heap (rules in memory.py).

Parquet inputs are sized from their footers (read through Hadoop's FileSystem, so any
scheme works, and no text is read): each row group records its rows and every column
chunk's uncompressed and compressed bytes. Other formats are measured while their rows
are checked (`read.check_rows`), since their parser reads every text anyway.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from neardup.runtime.java import java_class
from neardup.runtime.memory import BatchSizes, batch_sizes, human
from neardup.runtime.session import heap_and_slots

log = logging.getLogger("neardup")

# Footers read to profile a Parquet input: evenly spaced over its files.
_SAMPLED_FILES = 32

READER_ROWS = "spark.sql.parquet.columnarReaderBatchSize"
ARROW_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
ARROW_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"  # Spark 4.0 and later
# A column vector that had to grow past this for one batch (a batch with a huge
# document) is sized to fit (x ratio) and freed before the next batch, instead of
# doubling and staying that large for the rest of the file (Spark 3.5.2 and later).
HUGE_VECTOR = "spark.sql.inMemoryColumnarStorage.hugeVectorThreshold"
HUGE_VECTOR_RATIO = "spark.sql.inMemoryColumnarStorage.hugeVectorReserveRatio"
VECTORIZED = "spark.sql.parquet.enableVectorizedReader"
CACHE_ROWS = "spark.sql.inMemoryColumnarStorage.batchSize"
# Settings that exist only from some Spark release on. Spark takes any key without a word
# and an older release simply ignores one it does not know, so neardup sets these only
# where they exist and says so when a user's --conf would do nothing.
SINCE = {ARROW_BYTES: (4, 0, 0), HUGE_VECTOR: (3, 5, 2), HUGE_VECTOR_RATIO: (3, 5, 2)}


@dataclass(frozen=True)
class InputProfile:
    """Bytes per row of the input, as far as they are known before the text is read."""

    text_per_row: float  # bytes of the text column per row (uncompressed)
    row_per_row: float  # bytes of all columns per row (uncompressed)
    largest_text: int | None = None  # bytes of the longest text, when it was measured
    largest_chunk: int | None = None  # compressed bytes of the largest text column chunk
    source: str = ""

    def describe(self) -> str:
        parts = [f"text {human(self.text_per_row)} a row on average"]
        if self.largest_text is not None:
            parts.append(f"the longest {human(self.largest_text)}")
        if self.largest_chunk is not None:
            parts.append(f"largest compressed text chunk {human(self.largest_chunk)}")
        return ", ".join(parts) + f" ({self.source})"


def parquet_profile(spark: SparkSession, files: Sequence[str], text_col: str) -> InputProfile | None:
    """Sizes from the footers of up to `_SAMPLED_FILES` of `files`; None if none has rows."""
    if not files:
        return None
    step = max(1, len(files) // _SAMPLED_FILES)
    sample = list(files)[::step][:_SAMPLED_FILES]
    jvm: Any = spark._jvm
    jsc: Any = spark._jsc
    conf = jsc.hadoopConfiguration()
    rows = text = total = 0
    largest_chunk = 0
    for name in sample:
        path = java_class(jvm, "org.apache.hadoop.fs.Path")(name)
        reader = java_class(jvm, "org.apache.parquet.hadoop.ParquetFileReader").open(
            java_class(jvm, "org.apache.parquet.hadoop.util.HadoopInputFile").fromPath(path, conf)
        )
        try:
            for n, chunks in _footer_chunks(jvm, reader.getFooter()):
                rows += n
                for path, size, stored in chunks:
                    total += size
                    if path == text_col:
                        text += size
                        largest_chunk = max(largest_chunk, stored)
        finally:
            reader.close()
    if rows == 0:
        return None
    return InputProfile(
        text_per_row=text / rows,
        row_per_row=total / rows,
        largest_chunk=largest_chunk,
        source=f"Parquet metadata of {len(sample)} of {len(files)} files",
    )


def _footer_chunks(jvm: Any, footer: Any) -> list[tuple[int, list[tuple[str, int, int]]]]:
    """A Parquet footer's row groups: (rows, [(column path, uncompressed bytes, stored
    bytes)]). From the footer as JSON, one call into the JVM (a call per row group and column
    took 1.3 s for a file of 123 row groups); from the footer's objects where the JSON lacks
    a field (another parquet-mr's)."""
    try:
        metadata = java_class(jvm, "org.apache.parquet.hadoop.metadata.ParquetMetadata")
        blocks = json.loads(str(metadata.toJSON(footer)))["blocks"]
        return [
            (
                int(b["rowCount"]),
                [
                    (".".join(c["path"]), int(c["totalUncompressedSize"]), int(c["totalSize"]))
                    for c in b["columns"]
                ],
            )
            for b in blocks
        ]
    except (KeyError, TypeError, ValueError, Py4JError):
        return [
            (
                int(b.getRowCount()),
                [
                    (str(c.getPath().toDotString()), int(c.getTotalUncompressedSize()), int(c.getTotalSize()))
                    for c in b.getColumns()
                ],
            )
            for b in footer.getBlocks()
        ]


def measured_profile(rows: int, text_bytes: int, largest: int) -> InputProfile:
    per_row = text_bytes / rows if rows else 0.0
    # Other columns are unknown here; the text is nearly always most of a row.
    return InputProfile(per_row, 2 * per_row, largest, None, "measured while checking the rows")


def plan_batches(spark: SparkSession, profile: InputProfile | None, batch_bytes: int | None) -> BatchSizes:
    heap, slots, _ = heap_and_slots(spark)
    text = profile.text_per_row if profile else 0.0
    row = profile.row_per_row if profile else 0.0
    return batch_sizes(heap, slots, text, max(text, row), batch_bytes)


def writer_options(sizes: BatchSizes, text_col: str | None) -> dict[str, str]:
    """Parquet writer settings that bound its memory per task.

    The writer holds a row group (`parquet.block.size`), and it checks a page's size only
    every `row.check.min` rows (100 by default: 100 long documents make one page of
    hundreds of MB). For the text column it would also keep a dictionary of whole
    documents (which falls back to plain encoding only after it has grown) and copies of
    the smallest and largest value as statistics: neither helps anyone read a text column.
    """
    options = {
        "parquet.block.size": str(sizes.row_group_bytes),
        "parquet.page.size.row.check.min": "1",
    }
    if text_col:
        options[f"parquet.enable.dictionary#{text_col}"] = "false"
        options[f"parquet.column.statistics.enabled#{text_col}"] = "false"
    return options


def spark_release(version: str) -> tuple[int, int, int]:
    """'3.5.9' -> (3, 5, 9); suffixes such as '4.1.0-SNAPSHOT' or '3.5.0-databricks' are dropped."""
    parts = [int(m.group()) if (m := re.match(r"\d+", p)) else 0 for p in version.split(".")[:3]]
    major, minor, patch = [*parts, 0, 0, 0][:3]
    return major, minor, patch


def not_supported(keys: Iterable[str], version: str) -> dict[str, str]:
    """Of `keys`, those this Spark release ignores -> the release that brought them."""
    release = spark_release(version)
    return {k: ".".join(map(str, SINCE[k])) for k in keys if k in SINCE and release < SINCE[k]}


@contextlib.contextmanager
def batch_settings(spark: SparkSession, sizes: BatchSizes, user_set: Iterable[str] = ()) -> Iterator[None]:
    """The session's batch settings for the run, restored afterwards (a reused session
    goes back to what its owner had). Settings the user gave (`user_set`) are left alone;
    those of them this Spark does not know are reported (they would do nothing)."""
    user_set = set(user_set)
    wanted = {
        READER_ROWS: str(sizes.reader_rows),
        ARROW_ROWS: str(sizes.arrow_rows),
        # Spark 4 also closes an Arrow batch at this many bytes: a run of long documents
        # then makes smaller batches, and one longer than the limit travels alone.
        ARROW_BYTES: str(sizes.batch_bytes),
        HUGE_VECTOR: str(2 * sizes.batch_bytes),
        HUGE_VECTOR_RATIO: "1.1",
        VECTORIZED: str(sizes.vectorized_reader).lower(),
        # A cached frame is built a batch at a time: long documents make fewer rows a batch.
        CACHE_ROWS: str(sizes.cache_rows),
    }
    missing = not_supported(wanted, spark.version)
    for key in sorted(user_set & set(missing)):
        log.warning("%s has no effect on Spark %s: it needs Spark %s", key, spark.version, missing[key])
    if ARROW_BYTES in missing:
        log.info(
            "memory: Spark %s bounds Arrow batches by rows only (by bytes too from Spark 4.0): "
            "a run of documents far longer than the average makes a larger batch",
            spark.version,
        )
    wanted = {k: v for k, v in wanted.items() if k not in user_set and k not in missing}
    before = {k: spark.conf.get(k, None) for k in wanted}
    for k, v in wanted.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in before.items():
            with contextlib.suppress(Exception):  # after a JVM death there is nothing to restore
                if old is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, old)
