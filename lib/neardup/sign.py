"""Stage 2: MinHash signatures and LSH band keys, vectorized per Arrow batch.

Each Python worker receives Arrow record batches (`mapInArrow`, no pandas
conversion), normalizes the whole batch with Arrow compute kernels, and signs it
with one numba kernel that walks the UTF-8 buffers directly. Band keys are
computed here too, so the LSH shuffle moves (band, 64-bit key, id) rows only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config


@dataclass(frozen=True)
class SignParams:
    """Everything that determines a signature; also the stage's fingerprint."""

    lowercase: bool
    strip_punctuation: bool
    unit: str
    ngram: int
    char_ngram: int
    num_perm: int
    seed: int
    method: str
    bands: int
    rows: int

    @classmethod
    def from_config(cls, cfg: Config) -> SignParams:
        return cls(
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


def _signer(p: SignParams) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def sign_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.minhash import band_keys, signatures
        from neardup.textnorm import normalize

        for batch in batches:
            norm = normalize(
                batch.column(C.TEXT), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation
            )
            sigs = signatures(
                norm,
                unit=p.unit,
                ngram=p.ngram,
                char_ngram=p.char_ngram,
                num_perm=p.num_perm,
                seed=p.seed,
                method=p.method,
            )
            keys = band_keys(sigs, p.bands, p.rows, p.seed)
            n = len(batch)
            # One fixed-width binary per signature: little-endian uint32 slots.
            sig_col = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(4 * p.num_perm), n, [None, pa.py_buffer(sigs.astype("<u4", copy=False).tobytes())]
            ).cast(pa.binary())
            key_col = pa.FixedSizeListArray.from_arrays(pa.array(keys.reshape(-1), pa.int64()), p.bands).cast(
                pa.list_(pa.int64())
            )
            yield pa.RecordBatch.from_arrays(
                [batch.column(C.DOC_ID), sig_col, key_col], names=[C.DOC_ID, C.SIG, C.BAND_KEYS]
            )

    return sign_batches


def add_signatures(docs: DataFrame, params: SignParams) -> DataFrame:
    """(_id, _text) of documents with at least one shingle ->
    (_id, _sig: binary of num_perm little-endian uint32, _bands: array<long> of `bands` keys).

    Narrow (no shuffle).
    """
    id_field = next(f for f in docs.schema.fields if f.name == C.DOC_ID)
    schema = T.StructType(
        [
            id_field,
            T.StructField(C.SIG, T.BinaryType(), False),
            T.StructField(C.BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )
    return docs.select(C.DOC_ID, C.TEXT).mapInArrow(_signer(params), schema)
