"""Arrow plumbing shared by the kernels: the raw buffers of a string array, runs of equal
keys, and whole groups out of a stream of batches.

Spark hands `mapInArrow` a partition as batches of a bounded size, so a group (a small
LSH bucket) can straddle two or more batches: `whole_groups` holds its rows back until a
batch shows the next key. Only for groups known to be small: verification, whose groups
can be any size, carries state from batch to batch instead (kernels/scoring.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def whole_groups(batches: Iterable[pa.RecordBatch], key: str) -> Iterator[pa.Table]:
    """Tables of consecutive rows, each group of equal `key` whole in exactly one table.

    Rows must be clustered by `key` (equal keys adjacent), and `key` must not be null.
    """
    held: list[pa.RecordBatch] = []
    for batch in batches:
        if len(batch) == 0:
            continue
        rows = pa.Table.from_batches([*held, batch])
        keys = rows.column(key)
        # Clustered keys: the first row equal to the last row's key starts the last group.
        tail = int(np.asarray(pc.equal(keys, keys[len(rows) - 1])).argmax())
        held = rows.slice(tail).to_batches()
        if tail:
            yield rows.slice(0, tail)
    if held:
        yield pa.Table.from_batches(held)


def run_starts(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """int64 start row of each run of equal values, for a column of any comparable type."""
    n = len(keys)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.asarray(pc.not_equal(keys.slice(1), keys.slice(0, n - 1)))
    return np.flatnonzero(new).astype(np.int64)


I64Array = npt.NDArray[np.int64]
U8Array = npt.NDArray[np.uint8]
_EMPTY_DATA: U8Array = np.frombuffer(b"", dtype=np.uint8)


def _as_single_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        if texts.num_chunks == 1:
            return texts.chunk(0)
        try:
            return texts.combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowCapacityError):
            # More than 2 GiB of int32-offset text: only int64 offsets can hold it in one array.
            return texts.cast(pa.large_string()).combine_chunks()
    if not isinstance(texts, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(texts).__name__}")
    return texts


def text_buffers(texts: pa.Array | pa.ChunkedArray) -> tuple[I64Array, I64Array, U8Array]:
    """(starts, ends, data) views of a string array's buffers, zero-copy for the text bytes.

    ``data[starts[i]:ends[i]]`` is the UTF-8 of row i; a null row has ``starts == ends``.
    int32 offsets are widened to int64 (n + 1 values) and the array's slice offset honoured.
    """
    arr = _as_single_array(texts)
    n = len(arr)
    t = arr.type
    if pa.types.is_null(t):
        z = np.zeros(n, dtype=np.int64)
        return z, z.copy(), _EMPTY_DATA
    if pa.types.is_string(t) or pa.types.is_binary(t):
        off_dtype: type[np.signedinteger] = np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        off_dtype = np.int64
    elif str(t) in ("string_view", "binary_view"):  # by name: pa.types.is_*_view needs pyarrow 16
        arr = arr.cast(pa.large_binary())
        off_dtype = np.int64
    else:
        # No cast from other types: Arrow would happily format integers as text.
        raise TypeError(f"expected a string array, got {t}")
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        z = np.zeros(n, dtype=np.int64)
        return z, z.copy(), _EMPTY_DATA
    offsets = np.frombuffer(bufs[1], dtype=off_dtype)[arr.offset : arr.offset + n + 1]
    # Fresh writable int64 copies (8 bytes a row, negligible next to the text) whatever the
    # offset width: one array type per kernel argument means one numba specialization.
    starts = offsets[:-1].astype(np.int64)
    ends = offsets[1:].astype(np.int64)
    if arr.null_count:
        nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        ends[nulls] = starts[nulls]
    data = _EMPTY_DATA if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    return starts, ends, data
