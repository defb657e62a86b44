"""The over-merge guard on a corpus of planted drifting chains (neardup_testkit.chains),
against the brute-force reference (exact Jaccard of all similar pairs, the guard in
plain Python): whole clusters, every removed document's similarity, and pair recall."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from neardup import config
from neardup.pipeline import run
from neardup_testkit.chains import ChainSpec, generate
from neardup_testkit.reference import guarded_clusters, jaccard, shingles, similar_pairs

SPEC = ChainSpec()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[int], list[str]]:
    table = generate(SPEC)
    path = tmp_path_factory.mktemp("chains") / "chains.parquet"
    pq.write_table(table, path)
    return str(path), table["id"].to_pylist(), table["text"].to_pylist()


def _clusters(spark: Any, inp: str, out: Path, *sets: str) -> dict[int, tuple[int, float | None]]:
    run(spark, config.load(sets=list(sets)), inp, str(out))
    rows = pq.read_table(out / "clusters", columns=["id", "cluster_id", "similarity"]).to_pylist()
    return {r["id"]: (r["cluster_id"], r["similarity"]) for r in rows}


def _rounded(result: dict[int, tuple[int, float | None]]) -> dict[int, tuple[int, float | None]]:
    return {i: (k, None if s is None else round(s, 9)) for i, (k, s) in result.items()}


def _recall(result: dict[int, tuple[int, float | None]], true_pairs: set[tuple[int, int]]) -> float:
    return sum(result[a][0] == result[b][0] for a, b in true_pairs) / len(true_pairs)


def test_the_guard_splits_chains_and_keeps_recall(
    spark: Any, tmp_path: Path, corpus: tuple[str, list[int], list[str]]
) -> None:
    inp, ids, texts = corpus
    got = _clusters(spark, inp, tmp_path / "on")
    assert _rounded(got) == _rounded(guarded_clusters(ids, texts, 0.8, 0.7))
    # No kept document stands for a removed one below guard.threshold, by brute force.
    sets = dict(zip(ids, (shingles(t) for t in texts), strict=True))
    below = [i for i, (k, _) in got.items() if k != i and jaccard(sets[i], sets[k]) < 0.7]
    assert below == []
    # Pairs at J >= 0.9 (the stars' and the closest chain neighbours') stay together.
    high = set(similar_pairs(ids, texts, 0.9))
    assert len(high) > 150
    assert _recall(got, high) >= 0.99

    # Without the guard the chains merge whole, and many removed documents share little
    # with the one kept in their place: the reference agrees on every one of them.
    off = _clusters(spark, inp, tmp_path / "off", "guard.enabled=false")
    assert _rounded(off) == _rounded(guarded_clusters(ids, texts, 0.8, None))
    drifted = [i for i, (k, s) in off.items() if k != i and s is not None and s < 0.7]
    assert len(drifted) > 10 * SPEC.chains
    largest_off = max(sum(1 for k, _ in off.values() if k == c) for c in set(k for k, _ in off.values()))
    assert largest_off == SPEC.steps + 1
