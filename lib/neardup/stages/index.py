"""Stage: write one index segment from signed documents (`neardup index build|add`).

A segment holds each document's band keys, partitioned by band, and nothing of its text
(runtime/indexstore.py records where the texts are). Its size is what the band keys cost
raw, plus the ids once:

- each document gets a number `_n` within the segment (monotonically_increasing_id:
  consecutive within a task's partition), and the band rows are (`_band_key`, `_n`) sorted
  by `_n`, so `_n` costs next to nothing under Parquet's delta encoding and a row costs the
  8 bytes of its key; an id of any type or length is stored once, in docs/ (`_n`, `_id`);
- files are uncompressed (keys are random bits no codec shrinks) and written with Parquet's
  v2 pages (DELTA_BINARY_PACKED for longs) and no dictionary (every key is distinct).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.runtime.indexstore import DOCS, KEYS, SIGNATURES

WRITER = {
    "compression": "uncompressed",
    "parquet.writer.version": "v2",
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
    opts = {**options, **WRITER}
    numbered.select(C.DOC_NO, C.DOC_ID).write.options(**opts).parquet(f"{path}/{DOCS}")
    keys = numbered.select(C.DOC_NO, F.posexplode(C.BAND_KEYS).alias(C.BAND, C.BAND_KEY))
    # Sorted by band (what the partitioned writer needs, so it adds no sort of its own) and
    # then by _n (what makes the delta encoding of _n nearly free).
    keys.sortWithinPartitions(C.BAND, C.DOC_NO).select(C.BAND_KEY, C.DOC_NO, C.BAND).write.options(
        **opts
    ).partitionBy(C.BAND).parquet(f"{path}/{KEYS}")
    if signatures:
        numbered.select(C.DOC_NO, C.SIG).write.options(**opts).parquet(f"{path}/{SIGNATURES}")
