"""LSH candidate edges from band keys, against grouping the same keys in plain Python."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from frames import assert_counted
from neardup.kernels.band_blocks import balanced_labels
from neardup.stages.candidates import candidate_edges
from neardup_testkit import reference

pytestmark = pytest.mark.compat  # .ci/spark35 runs these on Spark 3.5 too


def _buckets(bands: dict[Any, list[int]]) -> list[list[Any]]:
    buckets: dict[int, list[Any]] = defaultdict(list)
    for doc, keys in bands.items():
        for key in keys:
            buckets[key].append(doc)
    return list(buckets.values())


@pytest.mark.parametrize(
    ("cap", "batch_rows", "ids", "kept", "on_driver"),
    [
        (32, 2, "string", False, False),
        (3, 10_000, "bigint", True, False),
        (1, 5, "bigint", False, False),
        (1024, 7, "bigint", True, False),
        (32, 2, "string", False, True),
        (3, 10_000, "bigint", True, True),
        (1024, 7, "bigint", True, True),
    ],
)
def test_candidate_edges_match_python_buckets(
    spark: Any, cap: int, batch_rows: int, ids: str, kept: bool, on_driver: bool
) -> None:
    """`kept`: the distinct candidates persisted, as the job has them; with cap 1024 no bucket
    is large, so no star edge: the candidates are the pairs as they are. `on_driver`: the
    pairs found on the driver (documents within the broadcast bound)."""
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
    buckets = _buckets(bands)
    want = reference.lsh_candidates(buckets, cap)
    assert any(len(v) > 50 for v in [[d for d in docs if bands[d][2] == 2000]])
    signed = spark.createDataFrame(
        [(d, reference.band_key_bytes(keys)) for d, keys in bands.items()], f"_id {ids}, _bands binary"
    ).repartition(3)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(batch_rows))  # small batches: buckets straddle Arrow batches
    try:
        persisted: list[Any] = []

        def keep(df: Any) -> Any:
            persisted.append(df.persist())
            return persisted[-1]

        found = candidate_edges(signed, cap, keep=keep if kept else None, on_driver=on_driver)
        rows = found.edges.collect()
        stars = [(r["src"], r["dst"]) for r in found.stars.collect()]
    finally:
        spark.conf.set(key, before)
        for df in persisted:
            df.unpersist()
    assert sorted(stars) == sorted(reference.star_groups(buckets, cap))
    assert bool(stars) == (cap < 80)  # the band-2 bucket of 80 documents is large below 80
    got = [(r["src"], r["dst"]) for r in rows]
    assert len(got) == len(set(got))
    assert set(got) == want
    # On the driver with no star edge, each src's pairs are counted for verification.
    if on_driver and not stars:
        assert found.known is not None
        assert_counted(found.edges, found.known)
    else:
        assert found.known is None
    # The star edges dropped change no component (were every candidate verified).
    full = reference.star_candidates(buckets, cap)
    assert set(got) <= full
    assert reference.bfs_components(docs, got) == reference.bfs_components(docs, full)


@pytest.mark.parametrize("on_driver", [False, True])
def test_a_document_keeps_its_smallest_centre_and_links_the_rest(spark: Any, on_driver: bool) -> None:
    """Large buckets (cap 2) whose minima differ: each document's edges by hand."""
    # Buckets: 100 -> {1..6}, 101 -> {2..6}, 102 -> {3..6}, 103 -> {4, 5, 6}, and 7 -> {1, 2},
    # a pair; the rest hold one document each.
    bands = {
        1: [100, 999, 998, 997, 7],
        2: [100, 101, 996, 995, 7],
        3: [100, 101, 102, 994, 993],
        4: [100, 101, 102, 103, 992],
        5: [100, 101, 102, 103, 991],
        6: [100, 101, 102, 103, 990],
    }
    signed = spark.createDataFrame(
        [(d, reference.band_key_bytes(k)) for d, k in bands.items()], "_id bigint, _bands binary"
    )
    got = {(r["src"], r["dst"]) for r in candidate_edges(signed, 2, on_driver=on_driver).edges.collect()}
    # (1, 2) is a pair, so 2 has no star edge. Centres: of 3, 1 and 2; of 4, 1 to 3; of 5 and
    # 6, 1 to 4. Each keeps its edge to 1; 2 is linked to 1 by the smallest document with
    # both, 3: (2, 3); 3 by 4: (3, 4); 4 by 5: (4, 5).
    assert got == {(1, 2), (1, 3), (1, 4), (1, 5), (1, 6), (2, 3), (3, 4), (4, 5)}
    assert got == reference.lsh_candidates(_buckets(bands), 2)


@pytest.mark.parametrize(("dests", "partitions"), [(24, 8), (7, 7)])
def test_balanced_labels_land_each_in_its_own_partition(spark: Any, dests: int, partitions: int) -> None:
    """The band shuffle's labels (kernels/band_blocks.py) go to partition d mod partitions
    under Spark's own hash partitioning, as the numpy Murmur3 says."""
    from pyspark.sql import functions as F

    labels = balanced_labels(dests, partitions)
    frame = spark.createDataFrame([(int(v), d) for d, v in enumerate(labels)], "_dest int, d int")
    placed = frame.repartition(partitions, "_dest").select("d", F.spark_partition_id().alias("p")).collect()
    assert sorted((r["d"], r["p"]) for r in placed) == [(d, d % partitions) for d in range(dests)]
