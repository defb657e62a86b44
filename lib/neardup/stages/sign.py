"""Stage: one pass over the text (normalize, hash for exact copies, sign, band).

Each Python worker receives Arrow record batches (`mapInArrow`, no pandas conversion)
and runs `kernels.signatures.sign_batch` on each, so the LSH shuffle moves (64-bit key, id)
rows only. Exact copies are still settled before LSH (`exact.py`): only one
representative per group is banded and verified.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.signatures import SignParams


def sign_params(cfg: Config) -> SignParams:
    return SignParams(
        lowercase=cfg.normalize.lowercase,
        strip_punctuation=cfg.normalize.strip_punctuation,
        unit=cfg.shingle.unit,
        ngram=cfg.shingle.ngram,
        char_ngram=cfg.shingle.char_ngram,
        num_perm=cfg.minhash.num_perm,
        seed=cfg.minhash.seed,
        method=cfg.minhash.method,
        bands=cfg.bands,
        rows=cfg.rows,
    )


def _signer(p: SignParams, keep: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def sign_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Imported on the executor: the kernels load their compiled code once per worker.
        from neardup.kernels.signatures import sign_batch

        for batch in batches:
            yield sign_batch(batch, p, keep)

    return sign_batches


def sign_documents(docs: DataFrame, params: SignParams, keep_signatures: bool = True) -> DataFrame:
    """docs (_id, _text, *carried: `_rank`, and `_priority` under survivor.policy
    priority), every row ->
    (_id, _thash: long, _thash_lo: long, reason: string, _len: int (characters of the
     original text, 0 when null), _bytes: int (its UTF-8 bytes, 0 when null), *carried unchanged,
     _bands: binary of `bands` little-endian int64 keys[, _sig: binary of num_perm
     little-endian uint32]).

    `_sig` is there only with `keep_signatures`: only signature verification reads it,
    and at 512 bytes a document it is most of the stage's output. `reason` is null for a
    document that goes on, else why it is rejected (null text, or empty after
    normalization); `_sig` and `_bands` are null exactly when `reason` is not.
    Narrow (no shuffle): one Arrow pass of the text.
    """
    fields = {f.name: f for f in docs.schema.fields}
    carried = [name for name in docs.columns if name not in (C.DOC_ID, C.TEXT)]
    schema = T.StructType(
        [
            fields[C.DOC_ID],
            T.StructField(C.TEXT_HASH, T.LongType(), False),
            T.StructField(C.TEXT_HASH_LO, T.LongType(), False),
            T.StructField(C.REASON, T.StringType(), True),
            T.StructField(C.LENGTH, T.IntegerType(), False),
            T.StructField(C.BYTES, T.IntegerType(), False),
            *(fields[name] for name in carried),
            T.StructField(C.BAND_KEYS, T.BinaryType(), True),
        ]
        + ([T.StructField(C.SIG, T.BinaryType(), True)] if keep_signatures else [])
    )
    signer = _signer(params, keep_signatures)
    return docs.select(C.DOC_ID, C.TEXT, *carried).mapInArrow(signer, schema)
