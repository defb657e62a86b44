"""The over-merge guard on a corpus of planted drifting chains (neardup_testkit.chains),
against the brute-force reference (exact Jaccard of all similar pairs, the guard in
plain Python): whole clusters, every removed document's similarity, and pair recall.
Then `neardup evaluate` on the same two outputs (guard on and off), against metrics
computed here by enumerating every pair of documents."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import config
from neardup.commands.dedup import run
from neardup.commands.evaluate import evaluate
from neardup.stages import driver_scoring
from neardup_testkit.chains import ChainSpec, generate
from neardup_testkit.reference import (
    cluster_pairs,
    exact_pairs,
    guarded_clusters,
    jaccard,
    reference_clusters,
    shingles,
    similar_pairs,
)

SPEC = ChainSpec()


Result = dict[int, tuple[int, float | None]]


@dataclass(frozen=True)
class Runs:
    inp: str
    ids: list[int]
    texts: list[str]
    on: Path  # the output with the guard (defaults)
    off: Path  # guard.enabled=false


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    table = generate(SPEC)
    root = tmp_path_factory.mktemp("chains")
    pq.write_table(table, root / "chains.parquet")
    inp = str(root / "chains.parquet")
    run(spark, config.load(sets=["report.html=false"]), inp, str(root / "on"))
    run(spark, config.load(sets=["guard.enabled=false", "report.html=false"]), inp, str(root / "off"))
    return Runs(inp, table["id"].to_pylist(), table["text"].to_pylist(), root / "on", root / "off")


def _clusters(out: Path) -> Result:
    rows = pq.read_table(out / "clusters", columns=["id", "cluster_id", "similarity"]).to_pylist()
    return {r["id"]: (r["cluster_id"], r["similarity"]) for r in rows}


def _rounded(result: Result) -> Result:
    return {i: (k, None if s is None else round(s, 9)) for i, (k, s) in result.items()}


def _recall(result: Result, true_pairs: set[tuple[int, int]]) -> float:
    return sum(result[a][0] == result[b][0] for a, b in true_pairs) / len(true_pairs)


def test_the_guard_splits_chains_and_keeps_recall(runs: Runs) -> None:
    ids, texts = runs.ids, runs.texts
    got = _clusters(runs.on)
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
    off = _clusters(runs.off)
    assert _rounded(off) == _rounded(guarded_clusters(ids, texts, 0.8, None))
    drifted = [i for i, (k, s) in off.items() if k != i and s is not None and s < 0.7]
    assert len(drifted) > 10 * SPEC.chains
    largest_off = max(sum(1 for k, _ in off.values() if k == c) for c in set(k for k, _ in off.values()))
    assert largest_off == SPEC.steps + 1


def test_the_guard_collects_its_first_scorings_texts_where_all_do_not_fit(
    spark: Any, runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clustered documents too many for the driver's text budget: the guard collects the
    texts of its first scoring's documents, and scores the later rounds and the nearest step
    from them (a collect per scoring whose documents they do not hold). The clusters and
    similarities are the brute-force reference's, and the same to the bit as with every
    clustered text collected."""
    clustered = json.loads((runs.on / "report.json").read_text())["counts"]["clustered"]
    monkeypatch.setattr(driver_scoring, "MAX_DOCS", clustered - 1)  # all but one: too many
    real = driver_scoring.DriverScorer.collect.__func__  # type: ignore[attr-defined]
    collected: list[int] = []

    def collect(cls: Any, docs: Any, ids: np.ndarray, *args: Any) -> Any:
        # The texts' bytes come from the exact stage's held rows: no job sums them.
        assert len(args) == 2 and args[1] is not None
        got = real(cls, docs, ids, *args)
        if got is not None:
            collected.append(len(ids))
        return got

    monkeypatch.setattr(driver_scoring.DriverScorer, "collect", classmethod(collect))
    score = driver_scoring.DriverScorer.score
    scored: list[int] = []

    def counted_score(self: Any, src: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        got = score(self, src, *args, **kwargs)
        if got is not None:
            scored.append(len(src))
        return got

    monkeypatch.setattr(driver_scoring.DriverScorer, "score", counted_score)
    out = tmp_path / "out"
    run(spark, config.load(sets=["report.html=false"]), runs.inp, str(out))
    # One collect, of the first scoring's documents, served all six scorings here (the rounds'
    # and the nearest step's).
    assert len(collected) == 1 and collected[0] < clustered
    assert len(scored) == 6
    got = _clusters(out)
    assert got == _clusters(runs.on)
    assert _rounded(got) == _rounded(guarded_clusters(runs.ids, runs.texts, 0.8, 0.7))
    guard = json.loads((out / "report.json").read_text())["guard"]
    assert guard["rounds"] >= 2 and guard["scored_pairs"] > 0


def _brute_force_scores(
    predicted: dict[int, int], truth: dict[int, Any], true_pairs: set[tuple[int, int]]
) -> dict[str, float]:
    """Pair precision/recall/F1 against `true_pairs`, and the adjusted Rand index of the
    two partitions, by enumerating all pairs of documents."""
    ids = sorted(predicted)
    same_p = same_t = both = total = 0
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            p, t = predicted[a] == predicted[b], truth[a] == truth[b]
            same_p += p
            same_t += t
            both += p and t
            total += 1
    hits = sum(predicted[a] == predicted[b] for a, b in true_pairs)
    precision, recall = hits / same_p, hits / len(true_pairs)
    expected = same_p * same_t / total
    ari = (both - expected) / ((same_p + same_t) / 2 - expected)
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
        "ari": ari,
    }


@pytest.mark.parametrize("which", ["on", "off"])
@pytest.mark.parametrize("kind", ["clusters", "pairs"])
def test_evaluate_with_labels(spark: Any, runs: Runs, tmp_path: Path, which: str, kind: str) -> None:
    out = runs.on if which == "on" else runs.off
    truth = reference_clusters(runs.ids, runs.texts, 0.8)
    true_pairs = set(similar_pairs(runs.ids, runs.texts, 0.8)) | exact_pairs(runs.ids, runs.texts)
    if kind == "clusters":
        labels = pa.table({"id": list(truth), "cluster": [str(c) for c in truth.values()]})
        pq.write_table(labels, tmp_path / "labels.parquet")
        path = str(tmp_path / "labels.parquet")
        pair_truth = cluster_pairs(truth)
    else:
        path = str(tmp_path / "labels.jsonl")
        Path(path).write_text(
            "".join(json.dumps({"id_a": a, "id_b": b}) + "\n" for a, b in sorted(true_pairs))
        )
        pair_truth = true_pairs
    predicted = {i: k for i, (k, _) in _clusters(out).items()}
    want = _brute_force_scores(predicted, truth, pair_truth)
    removed = [i for i, k in predicted.items() if i != k]
    if kind == "clusters":
        correct = sum(truth[i] == truth[predicted[i]] for i in removed)
    else:
        correct = sum((min(i, predicted[i]), max(i, predicted[i])) in true_pairs for i in removed)

    got = evaluate(spark, str(out), path, sample=10, seed=1, min_similarity=None)
    assert got["label_kind"] == kind and got["documents"] == len(runs.ids)
    assert got["label_ids_not_in_output"] == 0
    assert {k: got[k] for k in ("precision", "recall", "f1", "adjusted_rand_index", "removal_precision")} == (
        pytest.approx(
            {
                **{k: want[k] for k in ("precision", "recall", "f1")},
                "adjusted_rand_index": want["ari"],
                "removal_precision": correct / len(removed),
            }
        )
    )
    assert got["removed"] == len(removed)


@pytest.mark.parametrize("which", ["on", "off"])
def test_evaluate_without_labels_scores_every_removed_document(spark: Any, runs: Runs, which: str) -> None:
    out = runs.on if which == "on" else runs.off
    sets = dict(zip(runs.ids, (shingles(t) for t in runs.texts), strict=True))
    kept = {i: k for i, (k, _) in _clusters(out).items()}
    sims = np.array([jaccard(sets[i], sets[k]) for i, k in kept.items() if i != k])
    got = evaluate(spark, str(out), None, sample=100_000, seed=1, min_similarity=None)
    counts = np.zeros(20, dtype=int)
    for s in sims:  # bin i holds [i / 20, (i + 1) / 20); the last one 1.0 too
        counts[min(int(s * 20 + 1e-9), 19)] += 1
    assert (got["removed"], got["sampled"], got["min_similarity"]) == (len(sims), len(sims), 0.7)
    assert [b["count"] for b in got["histogram"]] == counts.tolist()
    assert got["removal_precision"] == pytest.approx(float((sims >= 0.7).mean()))
    assert got["quantiles"]["0.5"] == pytest.approx(float(np.median(sims)), abs=1e-6)
    if which == "on":
        assert got["removal_precision"] == 1.0
    else:  # the chains: a third of what is removed shares less than 0.7 with its kept one
        assert got["removal_precision"] < 0.8
