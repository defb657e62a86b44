"""Large buckets and stars spread over tasks (stages/skew.py, candidates.py, verify.py): the same
candidates, edges and clusters as when each stays in one task, against plain-Python buckets,
brute-force Jaccard and the skewed corpus's exact truth, whatever the partitioning."""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import columns as C
from neardup import config, harness
from neardup.commands.dedup import run
from neardup.stages import candidates, skew, verify
from neardup.stages.sign import sign_params
from neardup_testkit import reference
from neardup_testkit.skew import CLUSTER_OFFSET, SkewSpec, iter_skew_batches, skewed_batches
from neardup_testkit.synth import CorpusSpec
from neardup_testkit.truth import skewed_truth

NEVER = 2**40  # a threshold no bucket or star reaches: the one-task path


def _buckets(bands: dict[Any, list[int]]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = defaultdict(list)
    for doc, keys in bands.items():
        for key in keys:
            out[key].append(doc)
    return {k: sorted(v) for k, v in out.items()}


def _expected_edges(buckets: dict[int, list[Any]], cap: int) -> set[tuple[Any, Any]]:
    return reference.lsh_candidates(buckets.values(), cap)


def _band_keys(docs: int, ids: str) -> dict[Any, list[int]]:
    """Sparse ids; band 0: keys shared by chance, band 1: a bucket of half the documents and
    one of a fifth, band 2: all distinct, band 3: one bucket of every document."""
    rng = random.Random(5)
    return {
        (1000 + 7 * d if ids == "bigint" else f"doc-{7 * d:05d}"): [
            rng.randrange(300),
            1 if d % 2 else (2 if d % 5 == 0 else 10_000 + d),
            20_000 + d,
            3,
        ]
        for d in range(docs)
    }


@pytest.mark.parametrize(
    ("cap", "over", "partitions", "ids"),
    [
        (32, 40, 1, "bigint"),
        (3, 3, 7, "string"),
        (1, 90, 29, "bigint"),
    ],
)
def test_spread_buckets_give_the_same_candidates(
    spark: Any, cap: int, over: int, partitions: int, ids: str
) -> None:
    bands = _band_keys(500, ids)
    buckets = _buckets(bands)
    signed = spark.createDataFrame(
        [(d, reference.band_key_bytes(k)) for d, k in bands.items()], f"_id {ids}, _bands binary"
    ).repartition(3)
    want = _expected_edges(buckets, cap)
    # The large buckets, sizes and minima exactly.
    large = candidates._large_buckets(signed, over)
    assert large is not None
    assert sorted(tuple(r) for r in large) == sorted(
        (k, len(m), m[0]) for k, m in buckets.items() if len(m) > over
    )
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        spread = [(r[C.SRC], r[C.DST]) for r in candidates.candidate_edges(signed, cap, over).edges.collect()]
        whole = [(r[C.SRC], r[C.DST]) for r in candidates.candidate_edges(signed, cap, NEVER).edges.collect()]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
    assert len(spread) == len(set(spread))
    assert set(spread) == set(whole) == want


def test_no_large_bucket_leaves_the_plan_alone(spark: Any) -> None:
    bands = {d: [d, 10_000 + d // 2] for d in range(200)}  # buckets of one and two documents
    signed = spark.createDataFrame(
        [(d, reference.band_key_bytes(k)) for d, k in bands.items()], "_id bigint, _bands binary"
    )
    assert candidates._large_buckets(signed, 32) is None
    got = {(r[C.SRC], r[C.DST]) for r in candidates.candidate_edges(signed, 32, 32).edges.collect()}
    assert got == _expected_edges(_buckets(bands), 32)


def _texts() -> dict[str, str]:
    """60 near copies of a page (p00-p59: the skew generator's notice) and a cluster of 20
    near copies of another document (u00-u19)."""
    rows = pa.Table.from_batches(list(iter_skew_batches(SkewSpec(copies=60, clusters=1, cluster_size=20))))
    page = [r["text"] for r in rows.to_pylist() if r["cluster"] == CLUSTER_OFFSET]
    other = [r["text"] for r in rows.to_pylist() if r["cluster"] != CLUSTER_OFFSET]
    return {**{f"p{i:02d}": t for i, t in enumerate(page)}, **{f"u{i:02d}": t for i, t in enumerate(other)}}


@pytest.mark.parametrize(
    ("batch_rows", "broadcast", "partitions"),
    [
        (3, True, 7),
        (1, False, 1),
        (10_000, True, 29),
    ],
)
def test_spread_stars_give_the_same_edges(
    spark: Any, batch_rows: int, broadcast: bool, partitions: int
) -> None:
    rng = random.Random(batch_rows)
    texts = _texts()
    ids = sorted(texts)
    # A star of every copy around p00, smaller stars, and pairs among the unrelated ones.
    candidates = {("p00", i) for i in ids[1:60]} | {("p10", f"p{c}") for c in range(11, 30)}
    candidates |= {tuple(sorted(rng.sample(ids, 2))) for _ in range(60)}  # type: ignore[misc]
    cfg = config.load()
    t = cfg.verify_threshold
    sets = {i: reference.shingles(s) for i, s in texts.items()}
    want = {(a, b): reference.jaccard(sets[a], sets[b]) for a, b in candidates}
    assert 0 < sum(j >= t for j in want.values()) < len(want)
    docs = spark.createDataFrame(
        [(i, s, None) for i, s in texts.items()], "_id string, _text string, _rank long"
    ).repartition(3)
    cand = spark.createDataFrame(sorted(candidates), "src string, dst string").repartition(2)
    parts = verify._star_parts(cand, 5)
    assert parts is not None
    # Every group of more than 5 edges, with its parts (the sample is every row below 32).
    sizes = defaultdict(int)
    for a, _ in candidates:
        sizes[a] += 1
    assert sorted(tuple(r) for r in parts.collect()) == sorted(
        (a, skew.pieces(n, 5)) for a, n in sizes.items() if n > 5
    )
    # Derived from a bound of 16 rows a task (every row sampled): the threshold is a task's
    # share of the rows the sample counts, two per candidate.
    derived = verify._star_parts(cand, skew.TaskShare(rows=16 * 25, partitions=16, least=5))
    over = max(5, -(-2 * len(candidates) // 16))
    assert derived is not None and over < 25
    assert sorted(tuple(r) for r in derived.collect()) == sorted(
        (a, skew.pieces(n, over)) for a, n in sizes.items() if n > over
    )
    # Counted by the caller (the star rounds on the driver): the same parts, without a job.
    known = skew.counted(np.array([a for a, _ in sorted(candidates)], dtype=object))
    assert known.total == len(candidates) + len(sizes)
    counted_parts = verify._counted_parts(cand, known, 5)
    assert counted_parts is not None
    assert sorted(tuple(r) for r in counted_parts.collect()) == sorted(tuple(r) for r in parts.collect())
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(batch_rows))  # parts straddle Arrow batches
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        got = {}
        for over, counts in ((5, None), (5, known), (NEVER, None)):
            rows = verify.verify_pairs(
                cand,
                docs,
                docs,
                sign_params(cfg),
                "exact",
                t,
                broadcast_ends=broadcast,
                split_over=over,
                known=counts,
            ).collect()
            got[over, counts is None] = {(r[C.SRC], r[C.DST]): r[C.SIMILARITY] for r in rows}
            assert len(rows) == len(got[over, counts is None])
    finally:
        spark.conf.set(key, before)
        spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
    assert got[5, True] == got[5, False] == got[NEVER, True]
    assert set(got[5, True]) == {p for p, j in want.items() if j >= t}
    for p, j in got[5, True].items():
        assert j == pytest.approx(want[p], abs=1e-12)


@pytest.mark.compat
def test_split_threshold_is_a_tasks_share_unless_configured(spark: Any) -> None:
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert skew.split_threshold(spark, 7, 10**9) == 7 == skew.threshold(7, 10) == skew.least(7)
    derived = skew.split_threshold(spark, None, 10**9)
    assert derived is not None
    assert skew.threshold(derived) == -(-(10**9) // partitions)
    assert skew.threshold(derived, 10**6) == -(-(10**6) // partitions)  # an estimate below the bound
    assert skew.threshold(derived, 10**10) == skew.threshold(derived)  # never above it
    assert skew.threshold(derived, 10) == skew.least(derived) == skew.MIN_DERIVED
    floored = skew.split_threshold(spark, None, 10**6, floor=10**6)
    assert floored is not None and skew.threshold(floored) == 10**6
    assert skew.split_threshold(spark, None, skew.MIN_SPREAD_ROWS - 1) is None  # a small shuffle
    # ... unless its largest key is known to be large.
    small = skew.MIN_SPREAD_ROWS - 1
    assert skew.split_threshold(spark, None, small, largest=skew.MIN_SPREAD_KEY - 1) is None
    spread = skew.split_threshold(spark, None, small, largest=skew.MIN_SPREAD_KEY)
    assert spread is not None and skew.threshold(spread) == max(skew.MIN_DERIVED, -(-small // partitions))
    # Counted groups: no floor; a small shuffle in fewer tasks, of MIN_TASK_ROWS rows at least,
    # but a task per core.
    few = skew.counted(np.repeat(np.arange(10), 100))
    cores = min(partitions, spark.sparkContext.defaultParallelism)
    assert (few.total, skew.counted_partitions(spark, few)) == (1010, cores)
    assert skew.counted_threshold(spark, None, few) == max(skew.MIN_DERIVED, -(-1010 // cores))
    assert skew.counted_threshold(spark, 7, few) == 7
    assert few.over(99) == [(k, 100) for k in range(10)] and few.over(100) == []
    many = skew.counted(np.arange(partitions * skew.MIN_TASK_ROWS))
    assert skew.counted_partitions(spark, many) == partitions
    assert skew.counted_threshold(spark, None, many) == max(skew.MIN_DERIVED, -(-many.total // partitions))
    assert skew.sample_rate(8) == 1.0 and skew.sample_rate(3200) == 0.01
    assert [skew.pieces(n, 100) for n in (1, 25, 26, 100, 101, 10**6)] == [1, 1, 2, 4, 5, 40_000]
    assert skew.pieces(10**9, 1) == skew.MAX_PIECES


# --- the whole job on a skewed corpus ------------------------------------------------------

BASE = CorpusSpec(num_docs=300, seed=2, mean_chars=500)
SPEC = SkewSpec(copies=120, clusters=3, cluster_size=20, seed=3)
SPREAD = ["lsh.split_buckets_over=33", "verify.split_stars_over=8"]
WHOLE = [f"lsh.split_buckets_over={NEVER}", f"verify.split_stars_over={NEVER}"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    table = pa.Table.from_batches(list(skewed_batches(BASE, SPEC)))
    root = tmp_path_factory.mktemp("skewed")
    (root / "in").mkdir()
    step = -(-table.num_rows // 3)
    for i in range(3):
        pq.write_table(table.slice(i * step, step), root / "in" / f"part-{i}.parquet")
    (root / "reversed").mkdir()
    pq.write_table(table.take(pa.array(range(table.num_rows - 1, -1, -1))), root / "reversed" / "all.parquet")
    return {"table": table, "root": root, "truth": skewed_truth(table, 0.8, sample=0)}


def _run(
    spark: Any, inp: Path, out: Path, sets: list[str], partitions: int
) -> tuple[pa.Schema, list[dict[str, Any]]]:
    """clusters/ of a run: its schema and its rows in file order (not Arrow's bytes, which
    follow the chunks, one per file written)."""
    cfg = config.load(sets=["output.overwrite=true", "report.html=false", *sets])
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        run(spark, cfg, str(inp), str(out))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
    clusters = pq.read_table(out / "clusters")
    return clusters.schema, clusters.to_pylist()


def test_a_skewed_corpus_clusters_the_same_spread_or_not(
    spark: Any, corpus: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spread: past every broadcast bound (so the candidates are found by the shuffle, not
    on the driver), the large buckets and stars spread over tasks. Whole: the defaults'
    paths (the candidates on the driver), nothing spread."""
    root = corpus["root"]
    whole = _run(spark, root / "in", root / "whole", WHOLE, 4)
    monkeypatch.setattr(harness, "BROADCAST_ROWS", 0)
    with caplog.at_level(logging.INFO, logger="neardup"):
        spread = _run(spark, root / "in", root / "spread", SPREAD, 4)
    said = caplog.text
    assert "buckets of more than 33 documents" in said and "stars of more than 8 edges" in said
    other = _run(spark, root / "reversed", root / "spread-7", SPREAD, 7)
    assert spread == whole == other  # schema and rows, sorted by id
    rows = spread[1]

    # Against the exact truth: each skew group one cluster, the base rows as brute force has
    # them, and every removed document's similarity its exact Jaccard to its kept one.
    table, truth = corpus["table"], corpus["truth"]
    ids = table.column("id").to_pylist()
    label = dict(zip(ids, truth.labels.tolist(), strict=True))
    got = defaultdict(set)
    want = defaultdict(set)
    for r in rows:
        got[r["cluster_id"]].add(r["id"])
        want[label[r["id"]]].add(r["id"])
    assert sorted(map(sorted, got.values())) == sorted(map(sorted, want.values()))
    assert max(len(g) for g in got.values()) == SPEC.copies
    texts = dict(zip(ids, table.column("text").to_pylist(), strict=True))
    for r in rows:
        if r["status"] == "near_duplicate":
            exact = reference.jaccard(
                reference.shingles(texts[r["id"]]), reference.shingles(texts[r["cluster_id"]])
            )
            assert r["similarity"] == pytest.approx(exact, abs=1e-12)
