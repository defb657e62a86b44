"""Stage: write one index segment from signed documents (`neardup index build|add`).

A segment holds each document's band keys, partitioned by band, and nothing of its text
(runtime/indexstore.py records where the texts are). Its size is what the band keys cost
raw, plus the ids once:

- each document gets a number `_n` within the segment (monotonically_increasing_id:
  consecutive within a task's partition), and the band rows are (`_band_key`, `_n`) sorted
  by `_n`, so `_n` costs next to nothing under Parquet's delta encoding and a row costs the
  8 bytes of its key; an id of any type or length is stored once, in docs/ (`_n`, `_id`);
- band-key files are uncompressed (keys are random bits no codec shrinks), without a
  dictionary (every key is distinct), with Parquet's v2 pages (DELTA_BINARY_PACKED longs).

v2 pages only where every column is integer-backed: Spark's vectorized reader misreads v2's
DELTA_BYTE_ARRAY pages (on Spark 4.3 binary values came back shifted by four bytes, while
pyarrow and parquet-mr's own reader read them right), so docs/ with string ids and
signatures/ are written with v1 pages (PLAIN, zstd for docs/ to shrink `_n`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.runtime.indexstore import DOCS, KEYS, SIGNATURES
from neardup.stages.candidates import band_rows

_INTEGERS = (
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
)


def writer(df: DataFrame, compression: str = "uncompressed") -> dict[str, str]:
    """Parquet settings for an index file of `df`: v2 pages when every column is
    integer-backed (delta-encoded), else v1 (see the module docstring) with `compression`."""
    integers = all(isinstance(f.dataType, _INTEGERS) for f in df.schema.fields)
    return {
        "compression": "uncompressed" if integers else compression,
        "parquet.writer.version": "v2" if integers else "v1",
        "parquet.enable.dictionary": "false",
    }


def number_documents(signed: DataFrame, signatures: bool) -> DataFrame:
    """sign_documents' rows -> (_n: long, _id, _bands[, _sig]) of those with a signature
    (rejected rows, with no text to sign, are not indexed). Persist the result before
    writing from it twice: `_n` must be the same in every file of the segment."""
    return signed.filter(F.col(C.REASON).isNull()).select(
        F.monotonically_increasing_id().alias(C.DOC_NO),
        C.DOC_ID,
        C.BAND_KEYS,
        *([C.SIG] if signatures else []),
    )


def write_segment(numbered: DataFrame, path: str, options: Mapping[str, str], signatures: bool) -> None:
    """Write docs/ (_n, _id), keys/band=<b>/ (_band_key, _n) and, with `signatures`,
    signatures/ (_n, _sig) under `path`. `options`: the writer's memory bounds."""
    docs = numbered.select(C.DOC_NO, C.DOC_ID)
    docs.write.options(**options, **writer(docs, "zstd")).parquet(f"{path}/{DOCS}")
    # Sorted by band (what the partitioned writer needs, so it adds no sort of its own) and
    # then by _n (what makes the delta encoding of _n nearly free).
    keys = (
        band_rows(numbered, C.DOC_NO, with_band=True)
        .sortWithinPartitions(C.BAND, C.DOC_NO)
        .select(C.BAND_KEY, C.DOC_NO, C.BAND)
    )
    keys.write.options(**options, **writer(keys)).partitionBy(C.BAND).parquet(f"{path}/{KEYS}")
    if signatures:
        sigs = numbered.select(C.DOC_NO, C.SIG)
        sigs.write.options(**options, **writer(sigs)).parquet(f"{path}/{SIGNATURES}")
