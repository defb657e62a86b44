"""The whole pipeline on a generated corpus, scored against brute-force exact Jaccard.

The reference (neardup_testkit.reference) shingles with Python's own unicodedata and
tuples of words and compares every pair that shares a shingle: it shares no code
with the pipeline's kernels.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import config, harness
from neardup.commands.dedup import run
from neardup_testkit.reference import bfs_components, jaccard, shingles, similar_pairs
from neardup_testkit.synth import CorpusSpec, generate

N_DOCS = 2500
CLASSIC = ("minhash.method=classic", "verify.method=signature")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    table = generate(CorpusSpec(num_docs=N_DOCS, seed=11, mean_chars=500, dup_fraction=0.4))
    root = tmp_path_factory.mktemp("corpus")
    path = root / "input"
    path.mkdir()
    # Several files, so the input partitioning is not trivially one task.
    step = (len(table) + 3) // 4
    for i in range(4):
        pq.write_table(table.slice(i * step, step), path / f"part-{i}.parquet")
    ids = table.column("id").to_pylist()
    texts = table.column("text").to_pylist()
    sets = {i: shingles(t) for i, t in zip(ids, texts, strict=True)}
    pairs = similar_pairs(ids, texts, 0.3)
    return {"table": table, "path": str(path), "root": root, "ids": ids, "sets": sets, "pairs": pairs}


def _run(spark: Any, inp: str, out: Path, *sets: str) -> dict[str, Any]:
    cfg = config.load(sets=["output.overwrite=true", "report.html=false", *sets])
    result = run(spark, cfg, inp, str(out))
    clusters = pq.read_table(out / "clusters").to_pylist()
    kept = pq.read_table(out / "kept")
    return {"report": result.report, "clusters": clusters, "kept": kept, "sets": sets}


@pytest.fixture(
    scope="module",
    params=[CLASSIC, ("minhash.method=oph", "verify.method=exact")],  # and the defaults
    ids=["classic-signature", "oph-exact"],
)
def result(spark: Any, corpus: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    return _run(spark, corpus["path"], corpus["root"] / "-".join(request.param), *request.param)


def test_outputs_account_for_every_row(result: dict[str, Any], corpus: dict[str, Any]) -> None:
    rows = result["clusters"]
    assert sorted(r["id"] for r in rows) == sorted(corpus["ids"])
    by_status: dict[str, int] = defaultdict(int)
    for r in rows:
        by_status[r["status"]] += 1
        assert r["kept"] == (r["status"] in ("unique", "kept"))
        assert (r["cluster_id"] == r["id"]) == r["kept"]
    assert sum(by_status.values()) == N_DOCS
    kept_ids = {r["id"] for r in rows if r["kept"]}
    assert set(result["kept"].column("id").to_pylist()) == kept_ids
    # kept/ carries the input columns unchanged.
    assert result["kept"].schema.names == corpus["table"].schema.names
    counts = result["report"]["counts"]
    assert counts["kept"] == len(kept_ids)
    assert counts["near_duplicates"] == by_status["near_duplicate"]
    assert counts["exact_duplicates"] == by_status["exact_duplicate"]
    assert counts["input"] == N_DOCS


def test_recall_of_pairs_at_jaccard_0_9(result: dict[str, Any], corpus: dict[str, Any]) -> None:
    cluster = {r["id"]: r["cluster_id"] for r in result["clusters"]}
    high = [p for p, j in corpus["pairs"].items() if j >= 0.9]
    assert len(high) > 200, "the corpus must plant enough high-similarity pairs to measure"
    together = sum(cluster[a] == cluster[b] for a, b in high)
    assert together / len(high) >= 0.99, f"{together}/{len(high)} pairs with J >= 0.9 clustered"


def test_removed_documents_resemble_their_survivor(result: dict[str, Any], corpus: dict[str, Any]) -> None:
    sets = corpus["sets"]
    removed = [r for r in result["clusters"] if r["status"] in ("near_duplicate", "exact_duplicate")]
    assert len(removed) > 200
    close = sum(jaccard(sets[r["id"]], sets[r["cluster_id"]]) >= 0.7 for r in removed)
    assert close / len(removed) >= 0.98, (
        f"{close}/{len(removed)} removed docs have J >= 0.7 with the survivor"
    )


def test_dissimilar_documents_share_a_cluster_only_through_a_chain(
    result: dict[str, Any], corpus: dict[str, Any]
) -> None:
    # Verified pairs are estimated J >= 0.8; their true J is above 0.6 with overwhelming
    # probability at k=128. So two documents of one cluster must be joined by a path of
    # truly similar (J >= 0.6) pairs: one BFS component of that graph.
    edges = [p for p, j in corpus["pairs"].items() if j >= 0.6]
    comp = bfs_components(corpus["ids"], edges)
    members: dict[Any, list[Any]] = defaultdict(list)
    for r in result["clusters"]:
        members[r["cluster_id"]].append(r["id"])
    for kept_id, ids in members.items():
        assert {comp[i] for i in ids} == {comp[kept_id]}, f"cluster {kept_id} joins unrelated documents"


# Classic signatures verified by their estimate, which no other test runs under two
# partitionings; the defaults' are test_determinism.py's, test_skew.py's and test_against.py's.
@pytest.mark.parametrize("result", [CLASSIC], ids=["classic-signature"], indirect=True)
def test_same_output_whatever_the_partitioning(
    spark: Any, result: dict[str, Any], corpus: dict[str, Any], tmp_path: Path
) -> None:
    one_file = tmp_path / "one"
    one_file.mkdir()
    # Reverse row order in one file: partitioning and arrival order both change.
    table = corpus["table"]
    pq.write_table(table.take(pa.array(range(len(table) - 1, -1, -1))), one_file / "all.parquet")
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        other = _run(spark, str(one_file), tmp_path / "out", *result["sets"])
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
    assert other["clusters"] == result["clusters"]
    assert sorted(other["kept"].column("id").to_pylist()) == sorted(result["kept"].column("id").to_pylist())


# Exact verification's shuffle paths: every broadcast-or-shuffle choice made a shuffle (and
# the components distributed), so verification's ends are picked by the filter of their id
# fingerprints and a shuffle join (stages/verify.py), the guard scores in Spark, and the
# outputs are written by sort-merge joins. The same clusters as the default run's, which the
# tests above score against the reference.
@pytest.mark.parametrize(
    "result", [("minhash.method=oph", "verify.method=exact")], ids=["oph-exact"], indirect=True
)
def test_same_output_past_every_broadcast_bound(
    spark: Any,
    result: dict[str, Any],
    corpus: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(harness, "BROADCAST_ROWS", 0)
    other = _run(spark, corpus["path"], tmp_path / "out", *result["sets"])
    assert other["report"]["components"]["backend"] != "driver"
    assert other["clusters"] == result["clusters"]
    assert sorted(other["kept"].column("id").to_pylist()) == sorted(result["kept"].column("id").to_pylist())
