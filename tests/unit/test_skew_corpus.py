"""The skewed corpus (neardup_testkit.skew) and its exact truth (truth.skewed_truth), against
plain-Python references: word lists, `reference.jaccard` and all-pairs brute-force clusters."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pyarrow as pa
import pytest

from neardup_testkit import reference, skew, synth, truth
from neardup_testkit.skew import CLUSTER_OFFSET, SkewSpec

BASE = synth.CorpusSpec(num_docs=900, seed=4, mean_chars=600)
SPEC = SkewSpec(copies=150, clusters=4, cluster_size=12, seed=9)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pa.Table.from_batches(list(skew.skewed_batches(BASE, SPEC)))


def _skew_rows(table: pa.Table) -> list[dict[str, Any]]:
    return [r for r in table.to_pylist() if r["cluster"] >= CLUSTER_OFFSET]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"copies": -1},
        {"copies": 1, "clusters": -2},
        {"copies": 1, "cluster_size": 1},
        {"copies": 1, "seed": -1},
        {"copies": 1, "id_mean_gap": 0},
        {"copies": 10, "id_offset": 2**62},
    ],
)
def test_spec_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="SkewSpec"):
        SkewSpec(**kwargs)


def test_generation_is_deterministic_and_spread_through_the_base(table: pa.Table) -> None:
    assert table.equals(pa.Table.from_batches(list(skew.skewed_batches(BASE, SPEC))))
    assert table.schema.equals(synth.SCHEMA)
    assert table.num_rows == BASE.num_docs + SPEC.docs == 900 + 150 + 48
    # The base rows keep their order; the skew rows follow each base batch in equal shares.
    base = synth.generate(BASE)
    is_skew = [c >= CLUSTER_OFFSET for c in table.column("cluster").to_pylist()]
    assert table.filter(pa.array([not s for s in is_skew])).equals(base)
    assert is_skew[: BASE.num_docs] == [False] * BASE.num_docs  # one base batch, then the skew
    other = pa.Table.from_batches(list(skew.skewed_batches(BASE, SkewSpec(copies=150, clusters=4, seed=10))))
    assert other.column("text").to_pylist() != table.column("text").to_pylist()


def test_skew_ids_are_unique_shuffled_and_above_the_base(table: pa.Table) -> None:
    ids = table.column("id").to_pylist()
    assert len(set(ids)) == len(ids)
    skew_ids = [r["id"] for r in _skew_rows(table)]
    assert min(skew_ids) > max(synth.generate(BASE).column("id").to_pylist())
    assert skew_ids != sorted(skew_ids)


def test_every_copy_is_its_base_with_one_or_two_words_replaced(table: pa.Table) -> None:
    rows = _skew_rows(table)
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["cluster"]].append(r)
    assert Counter(len(g) for g in groups.values()) == Counter({150: 1, 12: 4})
    replaced: Counter[int] = Counter()
    for members in groups.values():
        (base,) = [r for r in members if r["target_jaccard"] is None]
        if base["cluster"] == CLUSTER_OFFSET:
            assert base["text"] == skew.NOTICE
        else:
            assert 150 <= len(base["text"].split()) <= 400
        words = reference.normalize(base["text"]).split()
        base_set = reference.shingles(base["text"])
        for r in members:
            if r is base:
                continue
            other = reference.normalize(r["text"]).split()
            assert len(other) == len(words)
            changed = sum(a != b for a, b in zip(words, other, strict=True))
            replaced[changed] += 1
            assert changed <= 2
            # The bound the edits keep (a replaced word may coincide with the one it replaces).
            assert reference.jaccard(base_set, reference.shingles(r["text"])) >= r["target_jaccard"] - 1e-12
    assert replaced[1] > 30 and replaced[2] > 30
    texts = [r["text"] for r in rows if r["cluster"] == CLUSTER_OFFSET]
    assert len(set(texts)) > 0.95 * len(texts)  # near copies, rarely exact ones


def test_skewed_truth_equals_brute_force_clusters(table: pa.Table) -> None:
    ids = table.column("id").to_pylist()
    found = truth.skewed_truth(table, threshold=0.8, sample=400)
    slow = reference.reference_clusters(ids, table.column("text").to_pylist(), 0.8)
    smallest: dict[int, Any] = {}
    for i, label in zip(ids, found.labels.tolist(), strict=True):
        smallest[label] = min(smallest.get(label, i), i)
    assert {i: smallest[label] for i, label in zip(ids, found.labels.tolist(), strict=True)} == slow
    assert found.largest == 150 and found.groups == 5 and found.skew_docs == SPEC.docs
    assert found.sample_cross_pairs == 0 and found.min_jaccard_to_base >= 0.8
    # The same with the base rows' truth given, as the benchmark passes its cached one.
    base = truth.ground_truth(synth.generate(BASE).select(["text", "cluster"]), 0.8, sample=0)
    assert (truth.skewed_truth(table, 0.8, sample=0, base=base).labels == found.labels).all()


def test_skewed_truth_refuses_a_copy_below_the_threshold(table: pa.Table) -> None:
    # At 0.95 some copies no longer reach their base: the premise of the star is gone.
    with pytest.raises(ValueError, match="no star"):
        truth.skewed_truth(table, threshold=0.95, sample=0)
