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
