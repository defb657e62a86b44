"""The driver's candidate pairs from band keys, against grouping the same keys in plain Python."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.band_edges import band_edges
from neardup_testkit import reference


def _case(seed: int, ids: str) -> tuple[list[Any], np.ndarray]:
    """500 documents, 5 bands: small key spaces in bands 0-2 (many shared buckets of a few
    documents), one large bucket in band 3, all distinct in band 4. Each band's keys are its
    own (as minhash.band_keys mixes the band in)."""
    rng = random.Random(seed)
    docs: list[Any] = rng.sample(range(10_000), 500)
    if ids == "string":
        docs = [f"doc-{d:05d}" for d in docs]
    keys = np.array(
        [
            [
                rng.randrange(400),
                10_000 + rng.randrange(200),
                20_000 + rng.randrange(60),
                30_000 if i % 4 == 0 else 40_000 + i,
                50_000 + i,
            ]
            for i in range(len(docs))
        ],
        dtype=np.int64,
    )
    return docs, keys


def _expected(docs: list[Any], keys: np.ndarray, cap: int) -> dict[tuple[Any, Any], bool]:
    buckets: dict[int, list[Any]] = defaultdict(list)
    for doc, row in zip(docs, keys.tolist(), strict=True):
        for key in row:
            buckets[key].append(doc)
    pairs, stars = reference._bucket_edges(buckets.values(), cap)
    return {**{e: True for e in stars}, **{e: False for e in pairs}}


@pytest.mark.parametrize(("seed", "ids", "cap"), [(1, "bigint", 32), (2, "string", 3), (3, "bigint", 2)])
def test_band_edges_match_python_buckets(seed: int, ids: str, cap: int) -> None:
    docs, keys = _case(seed, ids)
    want = _expected(docs, keys, cap)
    assert any(want.values()) and not all(want.values())  # stars and pairs both
    arrow_ids = pa.array(docs, pa.string() if ids == "string" else pa.int64())
    for threads in (1, 3):
        got = band_edges(arrow_ids, keys, cap, threads=threads)
        assert got.schema.names == ["src", "dst", "_star"]
        rows = list(zip(*(got.column(c).to_pylist() for c in got.schema.names), strict=True))
        assert len(rows) == len({(s, d) for s, d, _ in rows})  # each pair once
        assert {(s, d): star for s, d, star in rows} == want


def test_band_edges_of_documents_sharing_nothing() -> None:
    keys = np.arange(12, dtype=np.int64).reshape(4, 3)
    got = band_edges(pa.array([5, 6, 7, 8]), keys, 32)
    assert got.num_rows == 0 and got.schema.field("src").type == pa.int64()
    with pytest.raises(ValueError, match="3 ids for 4 rows"):
        band_edges(pa.array([5, 6, 7]), keys, 32)
