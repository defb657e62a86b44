"""Stage 1: normalize, hash the normalized text, and group exact copies.

Exact copies (equal normalized text) are settled here, before any signing: only
one representative per group goes on to MinHash, which keeps identical copies
out of LSH buckets and saves their signing cost. The representative is the best
document of its group by the survivor policy, so the policy picks the same
survivor whether a copy is exact or near.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.sparkutil import survivor_columns

REASON_NULL = "null text"
REASON_EMPTY = "empty text after normalization"


def _hasher(
    lowercase: bool, strip_punctuation: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Imported on the executor: the kernels JIT-compile once per Python worker.
        from neardup.hashing import text_hash128
        from neardup.textnorm import normalize

        for batch in batches:
            text = batch.column(C.TEXT)
            norm = normalize(text, lowercase=lowercase, strip_punctuation=strip_punctuation)
            h = text_hash128(norm)
            empty = pc.fill_null(pc.equal(pc.binary_length(norm), 0), True)
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column(C.DOC_ID),
                    pa.array(h[:, 0], pa.int64()),
                    pa.array(h[:, 1], pa.int64()),
                    empty,
                    batch.column(C.LENGTH),
                    batch.column(C.RANK),
                ],
                names=[C.DOC_ID, C.TEXT_HASH, C.TEXT_HASH_LO, C.EMPTY, C.LENGTH, C.RANK],
            )

    return hash_batches


def hash_texts(docs: DataFrame, cfg: Config) -> DataFrame:
    """docs (_id, _text, _len, _rank) with non-null text ->
    (_id, _thash: long, _thash_lo: long, _empty: boolean, _len, _rank).

    Narrow (no shuffle); one Arrow pass of the text through `mapInArrow`.
    """
    fields = {f.name: f for f in docs.schema.fields}
    schema = T.StructType(
        [
            fields[C.DOC_ID],
            T.StructField(C.TEXT_HASH, T.LongType(), False),
            T.StructField(C.TEXT_HASH_LO, T.LongType(), False),
            T.StructField(C.EMPTY, T.BooleanType(), False),
            fields[C.LENGTH],
            fields[C.RANK],
        ]
    )
    fn = _hasher(cfg.normalize.lowercase, cfg.normalize.strip_punctuation)
    return docs.select(C.DOC_ID, C.TEXT, C.LENGTH, C.RANK).mapInArrow(fn, schema)


def group_exact(hashed: DataFrame, cfg: Config) -> DataFrame:
    """(_id, _thash, _thash_lo, _len, _rank) of non-empty texts -> (_id, _rep, _len, _rank).

    `_rep` is the id of the group's best document by the survivor policy (its own
    id for a representative). One shuffle, by the 128-bit text hash.
    """
    group = Window.partitionBy(C.TEXT_HASH, C.TEXT_HASH_LO).orderBy(*survivor_columns(cfg))
    return hashed.select(
        C.DOC_ID,
        F.first(C.DOC_ID).over(group).alias(C.REP),
        C.LENGTH,
        C.RANK,
    )
