"""The band shuffle in blocks (kernels/band_blocks.py), with the shuffle done by hand: every
block sent to its label's list, each list read in order. Whatever the number of
destinations, the chunk size or the id type, the shared buckets are those of a plain
grouping of the (key, id) rows."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from neardup import columns as C
from neardup.kernels.band_blocks import (
    BLOCK,
    DEST,
    balanced_labels,
    band_blocks,
    band_key_rows,
    destination_buckets,
    destinations,
    shared_rows,
    sorted_order,
)
from neardup_testkit import reference


def _documents(rng: random.Random, n: int, ids: str) -> tuple[list[Any], list[list[int]]]:
    """n documents of 6 keys: mostly unique 64-bit keys, some drawn from a small pool (shared
    buckets of every size), and pairs of keys equal in their top 40 bits only."""
    pool = [rng.getrandbits(64) - (1 << 63) for _ in range(40)]
    twin = rng.getrandbits(64) - (1 << 63)
    doc_ids: list[Any] = [
        (rng.randrange(10**12) if ids == "bigint" else f"d{rng.randrange(10**9):09d}") for _ in range(n)
    ]
    keys = []
    for d in range(n):
        row = [rng.getrandbits(64) - (1 << 63) for _ in range(6)]
        if d % 3 == 0:
            row[rng.randrange(6)] = rng.choice(pool[: 1 + d % 40])
        if d % 50 == 0:
            row[5] = twin ^ (d & 0xFFFF)  # the same top bits, a different key
        keys.append(row)
    return doc_ids, keys


def _shuffled(blocks: list[pa.RecordBatch]) -> dict[int, list[pa.RecordBatch]]:
    """Each label's blocks in one list, sorted by label (as the stage's sort leaves them)."""
    out: dict[int, list[pa.RecordBatch]] = defaultdict(list)
    for batch in blocks:
        for label, block in zip(batch.column(DEST).to_pylist(), batch.column(BLOCK), strict=True):
            out[label].append(
                pa.RecordBatch.from_arrays([pa.array([label], pa.int32()), pa.array([block])], [DEST, BLOCK])
            )
    return out


@pytest.mark.parametrize(
    ("dests", "chunk", "ids"), [(1, 1 << 30, "bigint"), (7, 2000, "string"), (64, 300, "bigint")]
)
def test_shared_buckets_are_those_of_a_plain_grouping(dests: int, chunk: int, ids: str) -> None:
    rng = random.Random(dests)
    doc_ids, keys = _documents(rng, 1500, ids)
    id_type = pa.int64() if ids == "bigint" else pa.string()
    bands = pa.array([reference.band_key_bytes(k) for k in keys], pa.binary())
    table = pa.table({C.DOC_ID: pa.array(doc_ids, id_type), C.BAND_KEYS: bands})
    # Batches of Spark's sizes, one of them a slice (offsets not at zero).
    batches = [
        table.slice(0, 1).to_batches()[0],
        *table.slice(1, 700).to_batches(),
        *table.slice(701).to_batches(max_chunksize=97),
    ]
    labels = np.arange(dests, dtype=np.int64) * 3 + 11
    skip = np.array(sorted({k for row in keys for k in row[:1]})[:5], dtype=np.int64)
    blocks = list(band_blocks(iter(batches), dests, labels, skip, chunk_bytes=chunk))
    got: dict[int, list[tuple[Any, int, Any]]] = {}
    seen_labels = set()
    for label, parts in sorted(_shuffled(blocks).items()):
        seen_labels.add(label)
        for shared in destination_buckets(iter(parts)):
            for k, i, size, least in zip(
                *(shared.column(c).to_pylist() for c in (C.BAND_KEY, C.DOC_ID, C.BUCKET_SIZE, C.BUCKET_MIN)),
                strict=True,
            ):
                got.setdefault(k, []).append((i, size, least))
    want: dict[int, list[Any]] = defaultdict(list)
    for doc, row in zip(doc_ids, keys, strict=True):
        for k in row:
            if k not in set(skip.tolist()):
                want[k].append(doc)
    expected = {k: [(i, len(m), min(m)) for i in sorted(m)] for k, m in want.items() if len(m) > 1}
    assert got == expected
    assert seen_labels <= set(labels.tolist())
    assert len(expected) > 30 and max(len(v) for v in expected.values()) > 30


def test_destinations_spread_mixed_keys_evenly() -> None:
    keys = np.random.default_rng(3).integers(-(2**63), 2**63 - 1, 400_000, dtype=np.int64)
    counts = np.bincount(destinations(keys, 13), minlength=13)
    assert counts.sum() == len(keys) and counts.min() > 0.95 * len(keys) / 13


def test_sorted_order_is_a_stable_argsort() -> None:
    values = np.random.default_rng(4).integers(0, 50, 10_000)
    assert np.array_equal(sorted_order(values, 50), np.argsort(values, kind="stable"))


def test_shared_rows_of_one_row_and_of_none() -> None:
    one = pa.table({C.BAND_KEY: pa.array([5], pa.int64()), C.DOC_ID: pa.array([1], pa.int64())})
    assert shared_rows(one).num_rows == 0
    assert shared_rows(one.slice(0, 0)).num_rows == 0


@pytest.mark.parametrize(("dests", "partitions"), [(8, 8), (24, 8), (600, 200), (3, 1)])
def test_balanced_labels_give_each_partition_its_share(dests: int, partitions: int) -> None:
    from neardup.kernels.band_blocks import spark_int_partitions

    labels = balanced_labels(dests, partitions)
    assert len(set(labels.tolist())) == dests and labels.max() < 2**31
    parts = spark_int_partitions(labels, partitions)
    assert np.array_equal(parts, np.arange(dests) % partitions)


def test_band_key_rows_are_the_keys_in_band_order() -> None:
    keys = [[5, -1, 2**63 - 1], None, [-(2**63), 0, 7]]
    column = pa.array([None if k is None else reference.band_key_bytes(k) for k in keys], pa.binary())
    batch = pa.RecordBatch.from_arrays([pa.array(["a", "b", "c"]), column], names=["doc", C.BAND_KEYS])
    (out,) = band_key_rows([batch.slice(0)], "doc", with_band=True)
    assert out.to_pylist() == [
        {"doc": d, C.BAND: b, C.BAND_KEY: k}
        for d, ks in (("a", keys[0]), ("c", keys[2]))
        for b, k in enumerate(ks)
    ]
    (sliced,) = band_key_rows([batch.slice(1)], "doc")
    assert sliced.column(C.BAND_KEY).to_pylist() == keys[2]
