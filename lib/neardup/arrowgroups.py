"""Whole groups out of a stream of Arrow batches whose rows are clustered by a key.

Spark hands `mapInArrow` a partition as batches of a fixed number of rows, so a group
(a small LSH bucket) can straddle two or more batches. Its rows are held back until a
batch shows the next key; every table yielded holds whole groups. Only for groups known
to be small: verification, whose groups can be any size, carries state instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
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
