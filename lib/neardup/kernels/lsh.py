"""Candidate edges from the rows of LSH buckets, batch by batch.

Input rows are band rows of shared buckets: (band key, id, bucket size, bucket's smallest
id), clustered by key and sorted by id within a bucket (the Spark stage's window and sort
make them so). A bucket of up to `all_pairs_up_to` documents yields all its pairs; a larger
one a star from its smallest id, made from each row alone (its own id and the bucket
minimum), so a large bucket is never gathered. A small bucket may straddle batches: its
rows are held until the next key shows (`arrow.whole_groups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.arrow import run_starts, whole_groups
from neardup.kernels.buckets import pair_indices


def bucket_edges(batches: Iterable[pa.RecordBatch], all_pairs_up_to: int) -> Iterator[pa.RecordBatch]:
    """(_band_key, _id, _bucket_size, _bucket_min) batches -> (src, dst, _star) batches,
    src < dst; `_star` marks an edge from a large bucket's minimum (src) to a member.

    A pair sharing several buckets comes out once per bucket (the stage deduplicates, and
    keeps only some of a document's star edges: stages/lsh.py).
    """
    stars: list[pa.RecordBatch] = []

    def small_rows() -> Iterator[pa.RecordBatch]:
        # Rows of large buckets become star edges on the spot; the rest are grouped.
        for batch in batches:
            big = pc.greater(batch.column(C.BUCKET_SIZE), all_pairs_up_to)
            star = batch.filter(
                pc.and_(big, pc.not_equal(batch.column(C.DOC_ID), batch.column(C.BUCKET_MIN)))
            )
            if len(star):
                stars.append(
                    pa.RecordBatch.from_arrays(
                        [star.column(C.BUCKET_MIN), star.column(C.DOC_ID), _flags(len(star), True)],
                        names=[C.SRC, C.DST, C.STAR],
                    )
                )
            yield batch.filter(pc.invert(big))

    for rows in whole_groups(small_rows(), C.BAND_KEY):
        yield from stars
        stars.clear()
        starts = run_starts(rows.column(C.BAND_KEY))
        left, right = pair_indices(starts, np.diff(np.append(starts, len(rows))))
        ids = rows.column(C.DOC_ID)
        yield pa.RecordBatch.from_arrays(
            [
                ids.take(pa.array(left)).combine_chunks(),
                ids.take(pa.array(right)).combine_chunks(),
                _flags(len(left), False),
            ],
            names=[C.SRC, C.DST, C.STAR],
        )
    yield from stars


def _flags(n: int, value: bool) -> pa.Array:
    return pa.array(np.full(n, value, dtype=np.bool_))
