"""The candidate pairs of documents whose band keys one process holds. Pure numpy and pyarrow.

The stage's distributed path (band_blocks.py) sends each band key to its bucket's task; when
the documents are few enough for the driver (stages/candidates.py), their keys are read
there whole, and each band's buckets found with one sort: on the 1M benchmark corpus, 18
million keys in about 1 s of one core, where the shuffle and its jobs took 5-6 s of two.

A band key mixes in its band's index (minhash.band_keys), so a bucket is one band's: the
bands are sorted one at a time (1/bands of the keys in memory at once, besides the keys
themselves). The edges are the distributed path's (`buckets.bucket_edges` on each band's
shared buckets, rows sorted by key and id), except where two bands' keys collide, which
the distributed path would take for one bucket: with 64-bit keys, about n^2 / 2^65 such
keys for n keys (1e-5 for 18 million), each a pair verification then scores.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from neardup import columns as C
from neardup.kernels.band_blocks import shared_rows
from neardup.kernels.buckets import bucket_edges

I64Array = npt.NDArray[np.int64]


def band_edges(
    ids: pa.Array,
    keys: I64Array,
    all_pairs_up_to: int,
    threads: int = 1,
    rows: I64Array | None = None,
) -> pa.Table:
    """Each document's id and band keys, (n, bands) -> the distinct candidate pairs
    (src, dst, _star), src < dst; `_star` is true when the pair came from large buckets
    only (a star edge: src is the bucket's smallest id), false when any small bucket gave it.

    `threads` sort that many bands at once (numpy and Arrow sort without the GIL). `rows`:
    the documents are those rows of `keys` (a band's keys are copied out one band at a time
    either way).
    """
    n, bands = (len(rows), keys.shape[1]) if rows is not None else keys.shape
    if len(ids) != n:
        raise ValueError(f"{len(ids)} ids for {n} rows of band keys")
    id_type = ids.type
    schema = pa.schema([(C.SRC, id_type), (C.DST, id_type), (C.STAR, pa.bool_())])

    def one_band(band: int) -> list[pa.RecordBatch]:
        column = keys[:, band] if rows is None else keys[rows, band]
        found = shared_rows(pa.table({C.BAND_KEY: np.ascontiguousarray(column), C.DOC_ID: ids}))
        return list(bucket_edges(found.to_batches(), all_pairs_up_to)) if found.num_rows else []

    if threads > 1 and bands > 1:
        with ThreadPoolExecutor(min(threads, bands)) as pool:
            parts = list(pool.map(one_band, range(bands)))
    else:
        parts = [one_band(b) for b in range(bands)]
    edges = pa.Table.from_batches([b for part in parts for b in part], schema)
    merged = edges.group_by([C.SRC, C.DST], use_threads=False).aggregate([(C.STAR, "all")])
    # The aggregate is named after its column and function, and Arrow puts it first.
    return pa.table(
        [merged.column(C.SRC), merged.column(C.DST), merged.column(f"{C.STAR}_all")], schema=schema
    )
