"""Stage 1: one pass over the text: normalize, hash for exact copies, sign, band.

Each Python worker receives Arrow record batches (`mapInArrow`, no pandas
conversion), normalizes the whole batch with Arrow compute kernels, and then, on
that one normalized copy, computes the 128-bit hash of the text (exact copies),
the MinHash signature (one numba kernel that walks the UTF-8 buffers directly)
and the LSH band keys, so the LSH shuffle moves (64-bit key, id) rows only.

Why one pass for both: reading the text out of the JVM and normalizing it is the
most expensive step of the job (more than signing it: 10-20 us per document with
OPH), so hashing in one pass and signing in another, to spare the exact copies their
signatures, costs more than it saves. Exact copies are still settled before LSH:
only one representative per group is banded and verified (`exact.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup import columns as C
from neardup.config import Config

REASON_NULL = "null text"
REASON_EMPTY = "empty text after normalization"


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


def _signer(
    p: SignParams, keep_signatures: bool
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def sign_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Imported on the executor: the kernels JIT-compile (or load their cache) once per
        # Python worker, not once per batch.
        from neardup.hashing import text_hash128
        from neardup.minhash import band_keys, signatures
        from neardup.textnorm import normalize

        for batch in batches:
            n = len(batch)
            text = batch.column(C.TEXT)
            is_null = text.is_null()
            norm = normalize(
                pc.fill_null(text, ""), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation
            )
            empty = pc.equal(pc.binary_length(norm), 0)
            reason = pc.if_else(
                is_null, REASON_NULL, pc.if_else(empty, REASON_EMPTY, pa.scalar(None, pa.string()))
            )
            # Characters (code points) of the original text, as Spark's `length` counts them.
            length = pc.fill_null(pc.utf8_length(text), 0).cast(pa.int32())
            h = text_hash128(norm)
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
            # Rejected rows (null or empty text) carry no signature: nothing may band with them.
            valid = pa.py_buffer(np.packbits(~np.asarray(empty), bitorder="little").tobytes())
            key_col = pa.FixedSizeListArray.from_buffers(
                pa.list_(pa.int64(), p.bands), n, [valid], children=[pa.array(keys.reshape(-1), pa.int64())]
            ).cast(pa.list_(pa.int64()))
            cols = [
                batch.column(C.DOC_ID),
                pa.array(h[:, 0], pa.int64()),
                pa.array(h[:, 1], pa.int64()),
                reason,
                length,
                batch.column(C.RANK),
                key_col,
            ]
            names = [C.DOC_ID, C.TEXT_HASH, C.TEXT_HASH_LO, C.REASON, C.LENGTH, C.RANK, C.BAND_KEYS]
            if keep_signatures:
                # One fixed-width binary per signature: little-endian uint32 slots.
                sig_col = pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(4 * p.num_perm),
                    n,
                    [valid, pa.py_buffer(sigs.astype("<u4", copy=False).tobytes())],
                ).cast(pa.binary())
                cols.append(sig_col)
                names.append(C.SIG)
            yield pa.RecordBatch.from_arrays(cols, names=names)

    return sign_batches


def sign_documents(docs: DataFrame, params: SignParams, keep_signatures: bool = True) -> DataFrame:
    """docs (_id, _text, _rank), every row ->
    (_id, _thash: long, _thash_lo: long, reason: string, _len: int (characters of the
     original text, 0 when null), _rank,
     _bands: array<long> of `bands` keys[, _sig: binary of num_perm little-endian uint32]).

    `_sig` is there only with `keep_signatures`: only signature verification reads it,
    and at 512 bytes a document it is most of the stage's output.

    `reason` is null for a document that goes on, else why it is rejected (null text,
    or empty after normalization); `_sig` and `_bands` are null exactly when `reason`
    is not. Narrow (no shuffle): one Arrow pass of the text.
    """
    fields = {f.name: f for f in docs.schema.fields}
    schema = T.StructType(
        [
            fields[C.DOC_ID],
            T.StructField(C.TEXT_HASH, T.LongType(), False),
            T.StructField(C.TEXT_HASH_LO, T.LongType(), False),
            T.StructField(C.REASON, T.StringType(), True),
            T.StructField(C.LENGTH, T.IntegerType(), False),
            fields[C.RANK],
            T.StructField(C.BAND_KEYS, T.ArrayType(T.LongType(), False), True),
        ]
        + ([T.StructField(C.SIG, T.BinaryType(), True)] if keep_signatures else [])
    )
    fn = _signer(params, keep_signatures)
    return docs.select(C.DOC_ID, C.TEXT, C.RANK).mapInArrow(fn, schema)
