"""The LSH band shuffle in blocks: a document's band keys go to their buckets' tasks as a
few large binary rows, not one row per key. Pure numpy and pyarrow.

Every document has one 64-bit key per band, and nearly every key is a bucket of one: on
the 1M benchmark corpus 17 million (key, id) rows, of which 2-3 % share a bucket. As Spark
rows, each of the 18 million was written to the shuffle, read back, sorted and windowed in
the JVM (about 20 CPU-seconds of the stage's 25). Here the map side (`band_blocks`) splits
each chunk of documents' keys by destination with one numpy sort and writes each
destination's share as one Arrow IPC stream of (_band_key, _id): a few thousand binary
rows for Spark to shuffle. The reduce side (`destination_buckets`) reads a destination's
streams whole and finds its shared keys with one more sort; only their rows go on to
`buckets.bucket_edges`. Blocks carry the ids in their own Arrow type (an id of any type,
never pickled).

A destination is a function of the key alone (`destinations`), so every row of a bucket
meets in one place, whatever the partitioning, and the edges are the same for any number
of destinations. The stage gives each destination a label that Spark's hash partitioner
sends to a partition of its own (`balanced_labels`), so each task reads one destination:
a hash of destination numbers would give some tasks two or three and others none.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.signatures import band_keys_of

I64Array = npt.NDArray[np.int64]

# The map side's output: a destination's label and one Arrow IPC stream of its rows.
DEST = "_dest"
BLOCK = "_block"
# Band rows gathered on the map side before they are split by destination (their bytes: a
# key and an id each): the larger a chunk, the fewer and larger the blocks (a block per
# destination and chunk).
CHUNK_BYTES = 16 << 20


def destinations(keys: I64Array, dests: int) -> I64Array:
    """The destination (0 .. dests-1) of each band key: its top 32 bits scaled to the
    range. Band keys are already mixed hashes (minhash.band_keys), so their top bits are
    uniform."""
    top = keys.view(np.uint64) >> np.uint64(32)
    return ((top * np.uint64(dests)) >> np.uint64(32)).astype(np.int64)


def sorted_order(values: I64Array, bound: int) -> I64Array:
    """The stable order that sorts `values` (non-negative, below `bound`): packed with each
    row's index into one uint64 and sorted by value, which numpy does several times faster
    than an argsort."""
    n = len(values)
    bits = max(1, (n - 1).bit_length())
    if max(1, bound - 1).bit_length() + bits > 64:
        return np.argsort(values, kind="stable").astype(np.int64)
    packed = (values.astype(np.uint64) << np.uint64(bits)) | np.arange(n, dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64((1 << bits) - 1)).astype(np.int64)


def band_blocks(
    batches: Iterable[pa.RecordBatch],
    dests: int,
    labels: I64Array,
    skip: I64Array | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[pa.RecordBatch]:
    """(_id, _bands) batches -> (_dest: int, _block: binary) batches: each chunk of band
    rows split by destination, a destination's rows as one Arrow IPC stream of
    (_band_key, _id), labelled `labels[destination]`. Rows whose key is in `skip` (sorted:
    the large buckets, whose star edges the stage makes without a shuffle) are left out;
    so are documents without keys (none reach here: the stage bands signed
    representatives only)."""
    held: list[pa.RecordBatch] = []
    held_bytes = 0
    for batch in batches:
        if len(batch) == 0:
            continue
        held.append(batch)
        # A band row costs its key (8 bytes, in _bands) and its id, which repeats per band.
        keys = batch.column(C.BAND_KEYS)
        bands = max(1, keys.nbytes // (8 * len(batch)))
        held_bytes += keys.nbytes + bands * batch.column(C.DOC_ID).nbytes
        if held_bytes >= chunk_bytes:
            yield from _split(held, dests, labels, skip)
            held, held_bytes = [], 0
    if held:
        yield from _split(held, dests, labels, skip)


def _split(
    batches: list[pa.RecordBatch], dests: int, labels: I64Array, skip: I64Array | None
) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(batches)
    docs, matrix = band_keys_of(table.column(C.BAND_KEYS))
    keys = matrix.ravel()
    owner = np.repeat(docs, matrix.shape[1])
    if skip is not None and len(skip):
        wanted = ~np.isin(keys, skip)
        keys, owner = keys[wanted], owner[wanted]
    if len(keys) == 0:
        return
    dest = destinations(keys, dests)
    order = sorted_order(dest, dests)
    dest = dest[order]
    rows = pa.RecordBatch.from_arrays(
        [
            pa.array(keys[order], pa.int64()),
            table.column(C.DOC_ID).take(pa.array(owner[order])).combine_chunks(),
        ],
        names=[C.BAND_KEY, C.DOC_ID],
    )
    starts = np.flatnonzero(np.diff(dest, prepend=-1))
    ends = np.append(starts[1:], len(dest))
    blocks = [_ipc(rows.slice(s, e - s)) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    yield pa.RecordBatch.from_arrays(
        [pa.array(labels[dest[starts]], pa.int32()), pa.array(blocks, pa.binary())],
        names=[DEST, BLOCK],
    )


def band_key_rows(
    batches: Iterable[pa.RecordBatch], id_col: str, with_band: bool = False
) -> Iterator[pa.RecordBatch]:
    """(id_col, _bands) batches -> (id_col[, band: int], _band_key: long) batches, a row per
    key, the band's index with `with_band`: the band rows, for the stages that join or
    count them in Spark (the large buckets, --against, an index's keys/)."""
    for batch in batches:
        docs, matrix = band_keys_of(batch.column(C.BAND_KEYS))
        bands = matrix.shape[1] if matrix.ndim == 2 else 0
        ids = batch.column(id_col).take(pa.array(np.repeat(docs, bands)))
        cols = [ids]
        names = [id_col]
        if with_band:
            cols.append(pa.array(np.tile(np.arange(bands, dtype=np.int32), len(docs)), pa.int32()))
            names.append(C.BAND)
        cols.append(pa.array(matrix.ravel(), pa.int64()))
        names.append(C.BAND_KEY)
        yield pa.RecordBatch.from_arrays(cols, names=names)


def _ipc(rows: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_batch(rows)
    return bytes(sink.getvalue())


def destination_buckets(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """(_dest, _block) batches, clustered by _dest -> per destination, the rows of its
    shared buckets: (_band_key, _id, _bucket_size, _bucket_min), sorted by key and id
    (what `buckets.bucket_edges` takes). The stage sends one destination to a task."""
    held: list[pa.Table] = []
    current = None
    for batch in batches:
        for dest, block in zip(batch.column(DEST).to_pylist(), batch.column(BLOCK), strict=True):
            if dest != current and held:
                yield from _shared(held)
                held = []
            current = dest
            held.append(pa.ipc.open_stream(block.as_buffer()).read_all())
    if held:
        yield from _shared(held)


def _shared(tables: list[pa.Table]) -> Iterator[pa.Table]:
    rows = pa.concat_tables(tables).combine_chunks()
    found = shared_rows(rows)
    if found.num_rows:
        yield found


def shared_rows(rows: pa.Table) -> pa.Table:
    """(_band_key, _id) rows -> those of keys that occur more than once, with their
    bucket's size and smallest id: (_band_key, _id, _bucket_size, _bucket_min), sorted by
    key and id.

    Found by sorting the keys' top bits packed with each row's index (numpy's sort of a
    uint64 array, several times faster than an argsort): two rows with equal top bits are
    kept, then sorted by their whole key and id, so keys that only share their top bits
    (a handful in millions) fall out as buckets of one.
    """
    n = rows.num_rows
    keys = rows.column(C.BAND_KEY).to_numpy()
    if n > 1:
        bits = (n - 1).bit_length()
        index = np.uint64((1 << bits) - 1)
        packed = (keys.view(np.uint64) & ~index) | np.arange(n, dtype=np.uint64)
        packed.sort()
        top = packed >> np.uint64(bits)
        same = top[1:] == top[:-1]
        twice = np.zeros(n, dtype=bool)
        twice[1:] |= same
        twice[:-1] |= same
        picked = (packed[twice] & index).astype(np.int64)
    else:
        picked = np.empty(0, dtype=np.int64)
    sub = rows.take(pa.array(picked))
    sub = sub.take(pc.sort_indices(sub, [(C.BAND_KEY, "ascending"), (C.DOC_ID, "ascending")]))
    sorted_keys = sub.column(C.BAND_KEY).to_numpy()
    starts = np.flatnonzero(np.diff(sorted_keys, prepend=sorted_keys[:1] - 1)) if len(sub) else picked
    sizes = np.diff(np.append(starts, len(sub)))
    size = np.repeat(sizes, sizes)
    first = np.repeat(starts, sizes)
    shared = pa.table(
        [
            sub.column(C.BAND_KEY),
            sub.column(C.DOC_ID),
            pa.array(size, pa.int64()),
            sub.column(C.DOC_ID).take(pa.array(first, pa.int64())),
        ],
        names=[C.BAND_KEY, C.DOC_ID, C.BUCKET_SIZE, C.BUCKET_MIN],
    )
    return shared.filter(pa.array(size > 1))


def spark_int_partitions(values: I64Array, partitions: int) -> I64Array:
    """The partition Spark's hash partitioner gives an int column's `values` among
    `partitions`: Murmur3 x86_32 of the 4-byte int with seed 42 (Spark's `hash`), taken
    modulo `partitions`, non-negative. Only the shuffle's balance depends on it."""
    with np.errstate(over="ignore"):
        k = values.astype(np.uint32)
        k = k * np.uint32(0xCC9E2D51)
        k = (k << np.uint32(15)) | (k >> np.uint32(17))
        k = k * np.uint32(0x1B873593)
        h = np.uint32(42) ^ k
        h = (h << np.uint32(13)) | (h >> np.uint32(19))
        h = h * np.uint32(5) + np.uint32(0xE6546B64)
        h = h ^ np.uint32(4)
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x85EBCA6B)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(0xC2B2AE35)
        h = h ^ (h >> np.uint32(16))
    return np.mod(h.view(np.int32).astype(np.int64), partitions)


def balanced_labels(dests: int, partitions: int) -> I64Array:
    """A label for each of `dests` destinations (a multiple of `partitions`) such that Spark's
    hash partitioning of the labels sends dests / partitions of them to each partition:
    destination d goes to partition d mod partitions."""
    per = dests // partitions
    assert per * partitions == dests, "dests must be a multiple of partitions"
    span = 64 * dests + 1024
    while True:
        candidates = np.arange(span, dtype=np.int64)
        parts = spark_int_partitions(candidates, partitions)
        order = np.argsort(parts, kind="stable")
        counts = np.bincount(parts, minlength=partitions)
        if counts.min() >= per:
            break
        span *= 2
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    labels = np.empty(dests, dtype=np.int64)
    d = np.arange(dests)
    labels[:] = candidates[order[starts[d % partitions] + d // partitions]]
    return labels
