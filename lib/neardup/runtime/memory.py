"""How much memory the job may use, and how many rows go into a batch (no Spark here).

Real corpora have heavy-tailed document lengths, so every batch the job makes is
bounded in bytes, with a row count derived from the input's own bytes per row:

- the Parquet reader's columnar batch (`spark.sql.parquet.columnarReaderBatchSize`),
  whose string vector grows to hold the whole batch (and doubles when it grows);
- the Arrow batches sent to the Python workers (`spark.sql.execution.arrow.*`), which
  also bound each verification group's rows per batch;
- the Parquet writer's row group (`parquet.block.size`), held in memory until flushed.

The rule: a task slot's share of the heap is `(heap - 300 MiB) / slots` (Spark keeps
300 MiB for itself); a batch is a fixed fraction of that share, within [1, 16] MiB
(`BATCH_SHARE`), unless `memory.batch_bytes` says otherwise; rows per batch are the batch
bytes over the input's bytes per row (at least one row: a document larger than a batch
goes through alone). The constants come from the measurements in `bench/memory.py`
(docs/memory.md).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# What Spark's unified memory manager keeps out of every JVM heap.
SPARK_RESERVED = 300 * MiB
# A batch is this fraction of a task slot's share of the heap...
BATCH_SHARE = 1 / 32
# ... within these bounds: below 1 MiB the per-batch overhead shows, above 16 MiB nothing
# gets faster (2 KB documents fill 2048-row Arrow batches at 4 MiB).
MIN_BATCH = 1 * MiB
MAX_BATCH = 16 * MiB
# Spark's own row limits, kept as ceilings: short documents gain nothing from more rows.
MAX_READER_ROWS = 4096
MAX_ARROW_ROWS = 2048
# Rows of one batch of a cached frame (Spark's default): the candidates' texts are
# cached, and a batch of 10,000 long documents is built whole in the heap.
MAX_CACHE_ROWS = 10_000
# The Parquet writer holds a row group in memory: an eighth of a slot's share, within
# [8, 128] MiB (128 MiB is parquet-mr's default).
WRITER_SHARE = 1 / 8
MIN_ROW_GROUP = 8 * MiB
MAX_ROW_GROUP = 128 * MiB
# From this many bytes of text per row on average, Parquet is read row by row rather than
# in column vectors: a vector of long strings is copied twice more (into the vector, whose
# byte buffer and null flags both grow to the batch's bytes, then into rows). Measured on
# 2 cores: 2.35 KB a document, vectors 86.5 s against rows 93.5 s for 1M documents; 8 KB,
# 44.4 against 45.2 s for 100k; 45 KB (the heavy-tailed corpus), 56.8 against 43.9 s, and
# with rows the heavy-tailed corpus also runs in a 768 MiB heap.
ROW_READER_FROM = 8 * KiB
# Local mode takes this fraction of the machine's memory for the JVM heap by default; the
# rest is for the Python workers (a few times a batch each) and the operating system.
LOCAL_HEAP_SHARE = 0.5
MAX_LOCAL_HEAP = 31 * GiB  # above 32 GiB the JVM loses compressed object pointers

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_size(text: str, default_unit: str = "") -> int:
    """A JVM/Spark size ('4g', '512m', '1024k', '2gb', '123') in bytes.

    `default_unit` applies to a bare number: Spark reads `spark.driver.memory=4096`
    as MiB ('m') but `spark.sql.files.maxPartitionBytes=4096` as bytes ('').
    """
    m = _SIZE.match(str(text))
    if m is None:
        raise ValueError(f"not a size: {text!r}")
    number, unit = m.groups()
    unit = unit.lower() or default_unit.lower()
    return int(float(number) * _UNITS[unit])


def format_size(n: int) -> str:
    """Bytes -> the shortest exact JVM size: '12g', '768m', '1536k' (rounded down to KiB)."""
    for unit, scale in (("g", GiB), ("m", MiB), ("k", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{max(1, n // KiB)}k"


def human(n: float) -> str:
    """Bytes for people: '1.5 GB', '768 MB', '12 KB' (binary units)."""
    for unit, scale in (("GB", GiB), ("MB", MiB), ("KB", KiB)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def machine_memory() -> int | None:
    """Physical memory, or the container's limit (cgroup v2 or v1) if lower; None if unknown."""
    found: list[int] = []
    with contextlib.suppress(ValueError, OSError, AttributeError):
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # 'max' or a huge number means no limit
            found.append(int(text))
    return min(found) if found else None


def local_heap(machine: int) -> int:
    """The JVM heap for local mode on a machine with `machine` bytes: a half, in whole
    256 MiB steps, at least 1 GiB and below the compressed-pointer limit."""
    step = 256 * MiB
    share = int(machine * LOCAL_HEAP_SHARE) // step * step
    return max(GiB, min(MAX_LOCAL_HEAP, share))


def slot_share(heap: int, slots: int) -> int:
    """The heap one task slot may count on (Spark's reserve taken out first)."""
    return max(MiB, (heap - SPARK_RESERVED) // max(1, slots))


@dataclass(frozen=True)
class BatchSizes:
    """What bounds every batch of a run; `describe()` is logged at the start."""

    batch_bytes: int  # target bytes of one batch of documents
    reader_rows: int  # spark.sql.parquet.columnarReaderBatchSize
    arrow_rows: int  # spark.sql.execution.arrow.maxRecordsPerBatch
    row_group_bytes: int  # parquet.block.size of what the job writes
    vectorized_reader: bool = True  # spark.sql.parquet.enableVectorizedReader
    cache_rows: int = MAX_CACHE_ROWS  # spark.sql.inMemoryColumnarStorage.batchSize

    def describe(self) -> str:
        reader = f"reader {self.reader_rows:,} rows" if self.vectorized_reader else "row-by-row reader"
        return (
            f"batches of {human(self.batch_bytes)} ({reader}, Arrow {self.arrow_rows:,} rows), "
            f"written row groups of {human(self.row_group_bytes)}"
        )


def batch_sizes(
    heap: int,
    slots: int,
    text_bytes_per_row: float,
    row_bytes_per_row: float,
    batch_bytes: int | None = None,
) -> BatchSizes:
    """Batch sizes for a heap shared by `slots` concurrent tasks and an input whose text
    averages `text_bytes_per_row` (all columns: `row_bytes_per_row`)."""
    share = slot_share(heap, slots)
    if batch_bytes is None:
        batch_bytes = int(min(MAX_BATCH, max(MIN_BATCH, share * BATCH_SHARE)))

    def rows(per_row: float, ceiling: int) -> int:
        if per_row <= 0:
            return ceiling
        return int(max(1, min(ceiling, batch_bytes // max(1.0, per_row))))

    row_group = int(min(MAX_ROW_GROUP, max(MIN_ROW_GROUP, share * WRITER_SHARE)))
    return BatchSizes(
        batch_bytes=batch_bytes,
        reader_rows=rows(row_bytes_per_row, MAX_READER_ROWS),
        arrow_rows=rows(text_bytes_per_row, MAX_ARROW_ROWS),
        row_group_bytes=row_group,
        vectorized_reader=text_bytes_per_row < ROW_READER_FROM,
        cache_rows=rows(row_bytes_per_row, MAX_CACHE_ROWS),
    )
