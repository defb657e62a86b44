"""A star whose centre is not similar to its bucket: the failure class real text showed.

A long file that quotes a licence shares LSH buckets with short copies of that licence.
With the smallest id it is every such bucket's centre, and each copy's one star edge goes to
it and fails verification. Without further centres (`lsh.star_rounds=0`, the rule of
f5a1227) the copies, near-identical to each other, end in separate clusters; with them the
clusters are exactly the brute-force ones.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frames import assert_counted
from neardup import config
from neardup.commands.dedup import run
from neardup_testkit.reference import jaccard, reference_clusters, shingles

COPIES = 12
# Small stars: a bucket of more than 4 documents is a star. 32 bands of 4 rows, so the long
# file (J about 0.56 to each copy) shares a few buckets with the copies.
SETS = ("lsh.all_pairs_up_to=4", "lsh.bands=32", "lsh.rows=4", "output.overwrite=true", "report.html=false")


def _corpus() -> tuple[list[int], list[str]]:
    rng = random.Random(7)
    syllable = "{}{}{}".format
    vocab = [syllable(rng.choice("bcdfglmnprst"), rng.choice("aeiou"), i) for i in range(2000)]
    licence = " ".join(rng.choice(vocab) for _ in range(200))
    other = " ".join(rng.choice(vocab) for _ in range(150))
    # Id 0, the smallest: the licence quoted among other text.
    texts = [f"{other} {licence}"]
    texts += [f"copyright {2000 + i} holder {rng.choice(vocab)} {licence}" for i in range(COPIES)]
    return list(range(len(texts))), texts


def _partition(labels: dict[Any, Any]) -> set[frozenset[Any]]:
    groups: dict[Any, set[Any]] = {}
    for doc, label in labels.items():
        groups.setdefault(label, set()).add(doc)
    return {frozenset(g) for g in groups.values()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ids, texts = _corpus()
    sets = [shingles(t) for t in texts]
    # The premise, computed apart: the copies are near-identical, the long file is not.
    assert all(jaccard(sets[0], s) < 0.7 for s in sets[1:])
    assert all(jaccard(a, b) >= 0.9 for a in sets[1:] for b in sets[1:])
    root = tmp_path_factory.mktemp("stars")
    pq.write_table(pa.table({"id": ids, "text": texts}), root / "corpus.parquet")
    return {"root": root, "path": str(root / "corpus.parquet"), "truth": reference_clusters(ids, texts, 0.8)}


def _clusters(spark: Any, corpus: dict[str, Any], name: str, *sets: str) -> tuple[set[frozenset[Any]], Any]:
    out: Path = corpus["root"] / name
    result = run(spark, config.load(sets=[*SETS, *sets]), corpus["path"], str(out))
    rows = pq.read_table(out / "clusters", columns=["id", "cluster_id"]).to_pylist()
    return _partition({r["id"]: r["cluster_id"] for r in rows}), result.report


def test_further_centres_join_the_copies_a_long_centre_split(spark: Any, corpus: dict[str, Any]) -> None:
    truth = _partition(corpus["truth"])
    assert truth == {frozenset({0}), frozenset(range(1, COPIES + 1))}
    got, report = _clusters(spark, corpus, "rounds")
    assert got == truth
    stars = report["stars"]
    assert stars["rounds"] >= 1 and stars["still_split"] == 0 and stars["verified_pairs"] > 0


def test_one_edge_to_the_smallest_centre_alone_splits_them(spark: Any, corpus: dict[str, Any]) -> None:
    """The test above can fail: the same corpus without further centres is split."""
    got, report = _clusters(spark, corpus, "no-rounds", "lsh.star_rounds=0")
    assert got != _partition(corpus["truth"])
    assert report["stars"]["rounds"] is None


def test_driver_rounds_find_the_distributed_rounds_edges(spark: Any) -> None:
    """The rounds' bookkeeping on the driver (kernels/star_rounds.py) and as Spark jobs give
    the same further edges: the same centres (Spark's hashes), the same pairs verified. Star
    groups of string ids whose members fall into variants (alike within a variant only),
    with centres alike to none; a similarity oracle stands for verification. Every group ends
    whole, and each variant's members in one component (BFS apart from either path)."""
    from pyspark.sql import functions as F

    from neardup import columns as C
    from neardup.stages.components import connected_components
    from neardup.stages.stars import further_stars
    from neardup_testkit.reference import bfs_components

    rng = random.Random(3)
    stars, alike, groups = [], set(), []
    for g in range(6):
        centre = f"c{g:02d}"
        members = [f"m{g:02d}-{i:03d}" for i in range(rng.randint(20, 90))]
        variants = [members[i::3] for i in range(3)]
        for variant in variants:
            alike |= {(min(a, b), max(a, b)) for a in variant for b in variant if a < b}
        groups.append(variants)
        stars += [(centre, m) for m in members]
    star_frame = spark.createDataFrame(stars, f"{C.SRC} string, {C.DST} string")
    similar = spark.createDataFrame(sorted(alike), f"{C.SRC} string, {C.DST} string").withColumn(
        C.SIMILARITY, F.lit(0.95)
    )
    nodes = sorted({n for edge in stars for n in edge})
    labels = spark.createDataFrame([(n, n) for n in nodes], f"{C.DOC_ID} string, {C.COMPONENT} string")

    def verify(pairs: Any, n: int, known: Any) -> Any:
        if known is not None:
            assert_counted(pairs, known)
        return pairs.join(similar, [C.SRC, C.DST])

    def components(graph: Any, n: int) -> Any:
        return connected_components(graph, on_driver=True)[0]

    found = {}
    for on_driver in (True, False):
        rounds = further_stars(star_frame, labels, verify, components, 4, 8, lambda df: df.cache(), on_driver)
        edges = sorted(map(tuple, rounds.edges.select(C.SRC, C.DST).collect()))
        found[on_driver] = (edges, rounds.pairs, rounds.split)
    assert found[True] == found[False]
    edges, pairs, split = found[True]
    assert split == 0
    assert 0 < pairs < len(stars) * 16
    label = bfs_components(nodes, edges)
    assert [[len({label[m] for m in v}) for v in variants] for variants in groups] == [[1, 1, 1]] * 6
