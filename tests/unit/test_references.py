"""The fast references (neardup_testkit.truth, vectorized, used at benchmark scale) agree
with the slow ones (neardup_testkit.reference, plain Python) they stand in for."""

from __future__ import annotations

import random

import numpy as np

from neardup_testkit import reference, synth, truth


def _partition(ids: list[int], labels: list[int]) -> dict[int, int]:
    smallest: dict[int, int] = {}
    for i, label in zip(ids, labels, strict=True):
        smallest[label] = min(smallest.get(label, i), i)
    return {i: smallest[label] for i, label in zip(ids, labels, strict=True)}


def test_fast_ground_truth_equals_brute_force_clusters() -> None:
    table = synth.generate(synth.CorpusSpec(num_docs=400, seed=21, mean_chars=600, max_cluster_size=6))
    ids = table.column("id").to_pylist()
    texts = table.column("text").to_pylist()
    fast = truth.ground_truth(table.select(["text", "cluster"]), threshold=0.8, sample=200)
    assert fast.sample_cross_pairs == 0
    slow = reference.reference_clusters(ids, texts, 0.8)
    assert _partition(ids, fast.labels.tolist()) == {i: slow[i] for i in ids}
    assert fast.duplicate_clusters == len({v for k, v in slow.items() if k != v})
    # Pairs at or above the threshold: the planted clusters' similar pairs (exact copies too).
    similar = set(reference.similar_pairs(ids, texts, 0.8)) | reference.exact_pairs(ids, texts)
    assert fast.similar_pairs == len(similar) > 50


def test_fast_components_equal_bfs() -> None:
    rng = random.Random(3)
    n = 300
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(220)]
    edges += [(i, i + 1) for i in range(100, 160)]  # a long path
    a = np.array([e[0] for e in edges])
    b = np.array([e[1] for e in edges])
    fast = truth.components(n, a, b)
    slow = reference.bfs_components(range(n), edges)
    assert fast.tolist() == [slow[i] for i in range(n)]


def test_fast_scores_equal_pair_counting() -> None:
    rng = random.Random(8)
    n = 250
    predicted = [rng.randrange(60) for _ in range(n)]
    true = [rng.randrange(40) for _ in range(n)]
    fast = truth.score(np.array(predicted), np.array(true))
    pred = dict(enumerate(predicted))
    true_pairs = reference.cluster_pairs(dict(enumerate(true)))
    precision, recall, f1 = reference.pair_scores(pred, true_pairs)
    assert np.allclose([fast.precision, fast.recall, fast.f1], [precision, recall, f1], rtol=0, atol=1e-12)


def test_fast_shingles_equal_reference_sets() -> None:
    table = synth.generate(synth.CorpusSpec(num_docs=60, seed=4, mean_chars=400))
    texts = table.column("text")
    doc, k1, k2 = truth.shingle_rows(truth.normalized_words(texts))
    sizes = np.bincount(doc, minlength=len(texts))
    assert sizes.tolist() == [len(reference.shingles(t)) for t in texts.to_pylist()]
    assert len(set(zip(doc.tolist(), k1.tolist(), k2.tolist(), strict=True))) == len(doc)


def test_incremental_reference_without_an_index_is_the_plain_one() -> None:
    """dedup --against an empty index deduplicates the batch as dedup does; with the batch's
    own kept documents as the index, every batch document is matched to one of them or kept."""
    table = synth.generate(synth.CorpusSpec(num_docs=300, seed=8, mean_chars=500, dup_fraction=0.6))
    ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    plain = reference.guarded_clusters(ids, texts, 0.8, 0.7)
    assert reference.incremental_clusters(ids, texts, [], [], 0.8, 0.7) == plain
    kept = [i for i, (k, _) in plain.items() if k == i]
    assert len(kept) < len(ids)
    text_of = dict(zip(ids, texts, strict=True))
    offset = 1 << 40  # the same texts under new ids, indexed
    again = reference.incremental_clusters(
        ids, texts, [i + offset for i in kept], [text_of[i] for i in kept], 0.8, 0.7
    )
    assert all(k >= offset for k, _ in again.values())
    assert {i: (k - offset, s) for i, (k, s) in again.items() if i in kept} == {i: (i, 1.0) for i in kept}


def test_statuses_follow_exact_groups_and_kept_documents() -> None:
    words = " ".join(f"w{i}" for i in range(40))
    ids = [1, 2, 3, 4, 5]
    # 2 is 1 in capitals (an exact copy); 3 is 1 with a word more (near, longer: kept); 5 alone.
    texts = [words, words.upper(), words + " w99", "another text of its own entirely here", "x y z"]
    result = reference.guarded_clusters(ids, texts, 0.8, 0.7)
    assert {i: k for i, (k, _) in result.items()} == {1: 3, 2: 3, 3: 3, 4: 4, 5: 5}
    assert reference.statuses(ids, texts, result) == {
        1: "near_duplicate",
        2: "exact_duplicate",
        3: "kept",
        4: "unique",
        5: "unique",
    }
