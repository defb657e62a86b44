"""Signing a batch: normalize, hash for exact copies, MinHash, band keys, in one pass.

Why one pass for all of it: reading the text out of the JVM and normalizing it costs more
than signing it (10-20 us per document with OPH), so hashing in one pass and signing in
another, to spare the exact copies their signatures, costs more than it saves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.hashing import text_hash128
from neardup.kernels.minhash import band_keys, signatures
from neardup.kernels.textnorm import normalize

REASON_NULL = "null text"
# How `_bands` holds a row's band keys (`band_keys_of`); in the signatures' fingerprint.
BAND_KEYS_FORMAT = "binary, little-endian int64 per band"
# `sign_batch`'s first columns (the survivor policy's carried ones, then `_bands` and, where
# kept, `_sig` follow); in the signatures' fingerprint as SIGNED_COLUMNS, so signatures an
# earlier release kept under _work/ with other columns are not read as this one's.
SIGNED = (C.DOC_ID, C.TEXT_HASH, C.TEXT_HASH_LO, C.REASON, C.LENGTH, C.BYTES)
SIGNED_COLUMNS = ", ".join([*SIGNED, "*carried", C.BAND_KEYS, f"[{C.SIG}]"])
REASON_EMPTY = "empty text after normalization"


@dataclass(frozen=True)
class SignParams:
    """Everything that determines a signature; also part of the signing stage's fingerprint."""

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


def normalized(texts: pa.Array | pa.ChunkedArray, p: SignParams) -> pa.Array:
    """Texts normalized as the run normalizes them (kernels/textnorm.py); null as empty."""
    return normalize(pc.fill_null(texts, ""), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation)


def text_signatures(norm: pa.Array, p: SignParams) -> np.ndarray:
    """(n, num_perm) uint32 MinHash signatures of normalized texts, with the run's parameters."""
    return signatures(
        norm,
        unit=p.unit,
        ngram=p.ngram,
        char_ngram=p.char_ngram,
        num_perm=p.num_perm,
        seed=p.seed,
        method=p.method,
    )


def sign_batch(batch: pa.RecordBatch, p: SignParams, keep_signatures: bool) -> pa.RecordBatch:
    """(_id, _text, *carried) -> (_id, _thash, _thash_lo, reason, _len, _bytes, *carried, _bands[, _sig]).

    `carried` are the batch's other columns (the survivor policy's: `_rank`, and
    `_priority` under priority), passed through unchanged in their order.

    `reason` is "null text" or "empty text after normalization" for a row that cannot be
    signed (its `_bands` and `_sig` are null: nothing may band with it), else null.
    `_len` counts the code points of the original text (0 when null), as Spark's `length`
    would; `_bytes` its UTF-8 bytes (0 when null), which budget texts collected to the
    driver (stages/driver_scoring.py) without a job to measure them. `_bands` holds `bands`
    little-endian int64 keys (`band_keys_of`); `_sig` is num_perm little-endian uint32 slots.
    """
    n = len(batch)
    carried = [name for name in batch.schema.names if name not in (C.DOC_ID, C.TEXT)]
    text = batch.column(C.TEXT)
    is_null = text.is_null()
    norm = normalized(text, p)
    empty = pc.equal(pc.binary_length(norm), 0)
    reason = pc.if_else(is_null, REASON_NULL, pc.if_else(empty, REASON_EMPTY, pa.scalar(None, pa.string())))
    length = pc.fill_null(pc.utf8_length(text), 0).cast(pa.int32())
    size = pc.fill_null(pc.binary_length(text), 0).cast(pa.int32())
    h = text_hash128(norm)
    sigs = text_signatures(norm, p)
    keys = band_keys(sigs, p.bands, p.rows, p.seed)
    valid = pa.py_buffer(np.packbits(~np.asarray(empty), bitorder="little").tobytes())
    # One binary value of `bands` little-endian int64 keys a row, not a list: Spark writes,
    # reads and converts a binary value as one copy, a list element by element (band_keys_of
    # reads them back).
    key_col = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8 * p.bands), n, [valid, pa.py_buffer(keys.astype("<i8", copy=False).tobytes())]
    ).cast(pa.binary())
    cols = [
        batch.column(C.DOC_ID),
        pa.array(h[:, 0], pa.int64()),
        pa.array(h[:, 1], pa.int64()),
        reason,
        length,
        size,
        *(batch.column(name) for name in carried),
        key_col,
    ]
    names = [*SIGNED, *carried, C.BAND_KEYS]
    if keep_signatures:
        sig_col = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(4 * p.num_perm), n, [valid, pa.py_buffer(sigs.astype("<u4", copy=False).tobytes())]
        ).cast(pa.binary())
        cols.append(sig_col)
        names.append(C.SIG)
    return pa.RecordBatch.from_arrays(cols, names=names)


def band_keys_of(col: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A `_bands` column (binary: each row's band keys as little-endian int64) -> (rows,
    keys): the indexes of its non-null rows and their keys, an (n, bands) int64 array. Every
    non-null row holds the same number of keys."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.int64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    lengths = np.diff(offsets)
    rows = np.flatnonzero(np.asarray(arr.is_valid()) & (lengths > 0))
    if len(rows) == 0:
        return rows, np.empty((0, 0), dtype=np.int64)
    width = int(lengths[rows[0]])
    if width % 8 or np.any(lengths[rows] != width):
        raise ValueError("band keys of different lengths in one column")
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    if len(rows) == n and offsets[-1] - offsets[0] == n * width:
        block = data[offsets[0] : offsets[-1]]  # contiguous: no copy
    else:
        block = data[(offsets[rows][:, None] + np.arange(width)).ravel()]
    return rows.astype(np.int64), block.view("<i8").astype(np.int64, copy=False).reshape(
        len(rows), width // 8
    )
