"""LSH candidate edges from band keys, against grouping the same keys in plain Python."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from typing import Any

import pytest

from neardup.stages.lsh import candidate_edges


def _expected(bands: dict[Any, list[int]], cap: int) -> set[tuple[Any, Any]]:
    buckets: dict[int, list[Any]] = defaultdict(list)
    for doc, keys in bands.items():
        for key in keys:
            buckets[key].append(doc)
    edges: set[tuple[Any, Any]] = set()
    for members in buckets.values():
        members.sort()
        if len(members) <= cap:
            edges.update(itertools.combinations(members, 2))
        else:
            edges.update((members[0], m) for m in members[1:])
    return edges


@pytest.mark.parametrize(
    ("cap", "batch_rows", "ids"), [(32, 2, "string"), (3, 10_000, "bigint"), (1, 5, "bigint")]
)
def test_candidate_edges_match_python_buckets(spark: Any, cap: int, batch_rows: int, ids: str) -> None:
    rng = random.Random(cap)
    docs: list[Any] = list(range(400))
    if ids == "string":
        docs = [f"doc-{d:04d}" for d in docs]
    # 4 bands; keys shared by chance among a small key space in bands 0-1, one big bucket
    # (every 5th document) in band 2, all distinct in band 3.
    bands = {
        d: [rng.randrange(300), 1000 + rng.randrange(150), 2000 if i % 5 == 0 else 3000 + i, 9000 + i]
        for i, d in enumerate(docs)
    }
    want = _expected(bands, cap)
    assert any(len(v) > 50 for v in [[d for d in docs if bands[d][2] == 2000]])
    signed = spark.createDataFrame(
        [(d, keys) for d, keys in bands.items()], f"_id {ids}, _bands array<bigint>"
    ).repartition(3)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(batch_rows))  # small batches: buckets straddle Arrow batches
    try:
        rows = candidate_edges(signed, cap).collect()
    finally:
        spark.conf.set(key, before)
    got = [(r["src"], r["dst"]) for r in rows]
    assert len(got) == len(set(got))
    assert set(got) == want
