"""kernels/metrics.py against independent computations: pair counts by enumerating every
pair, the adjusted Rand index by its definition over all pairs, Wilson intervals against
published values, histograms and quantiles against plain Python."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from neardup.kernels.metrics import PairCounts, pairs_of, scores, similarity_summary, wilson


def _all_pairs(pred: list[int], true: list[int]) -> PairCounts:
    same_p = same_t = both = 0
    for a, b in combinations(range(len(pred)), 2):
        p, t = pred[a] == pred[b], true[a] == true[b]
        same_p, same_t, both = same_p + p, same_t + t, both + (p and t)
    n = len(pred)
    return PairCounts(both, same_p, same_t, n * (n - 1) // 2)


def _contingency(pred: list[int], true: list[int]) -> PairCounts:
    """What stages/evaluate_output.py does in Spark: sums of C(size, 2) over groups."""
    cells = np.unique(np.array([pred, true]).T, axis=0, return_counts=True)[1]
    n = len(pred)
    return PairCounts(
        pairs_of(cells),
        pairs_of(np.unique(pred, return_counts=True)[1]),
        pairs_of(np.unique(true, return_counts=True)[1]),
        n * (n - 1) // 2,
    )


def _ari_by_definition(pred: list[int], true: list[int]) -> float:
    """Hubert and Arabie's index from the 2x2 table of pair agreements (a, b, c, d)."""
    a = b = c = d = 0
    for i, j in combinations(range(len(pred)), 2):
        p, t = pred[i] == pred[j], true[i] == true[j]
        a, b, c, d = a + (p and t), b + (p and not t), c + (t and not p), d + (not p and not t)
    n = a + b + c + d
    expected = (a + b) * (a + c) / n
    return (a - expected) / (((a + b) + (a + c)) / 2 - expected)


@pytest.mark.parametrize("seed", range(6))
def test_pair_counts_and_ari_match_all_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    true = rng.integers(0, 12, n).tolist()
    # A prediction that mostly agrees: some documents moved to another cluster.
    pred = [t if rng.random() < 0.8 else int(rng.integers(0, 15)) for t in true]
    counts = _contingency(pred, true)
    assert counts == _all_pairs(pred, true)
    s = scores(counts)
    assert s.adjusted_rand_index == pytest.approx(_ari_by_definition(pred, true))
    assert s.precision == pytest.approx(counts.together / counts.predicted)
    assert s.f1 == pytest.approx(2 * s.precision * s.recall / (s.precision + s.recall))


def test_identical_partitions_score_one_and_empty_ones_do_not_divide_by_zero() -> None:
    labels = [0, 0, 1, 1, 1, 2]
    s = scores(_contingency(labels, labels))
    assert (s.precision, s.recall, s.f1, s.adjusted_rand_index) == (1.0, 1.0, 1.0, 1.0)
    alone = list(range(5))
    s = scores(_contingency(alone, alone))
    assert (s.precision, s.recall) == (1.0, 1.0)


def test_pairs_of_is_exact_for_huge_sizes() -> None:
    assert pairs_of(np.array([3_000_000_000, 1, 0, 2])) == 3_000_000_000 * 2_999_999_999 // 2 + 1


def test_wilson_interval_against_published_values() -> None:
    # Newcombe (1998), Statistics in Medicine 17, table I: 81/263 -> 0.2553..0.3662,
    # 15/148 -> 0.0624..0.1605, 0/20 -> 0..0.1611, 1/29 -> 0.0061..0.1718.
    for (k, n), (lo, hi) in {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 20): (0.0, 0.1611),
        (1, 29): (0.0061, 0.1718),
    }.items():
        got = wilson(k, n)
        assert got == pytest.approx((lo, hi), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_similarity_summary_against_plain_python() -> None:
    values = [0.0, 0.05, 0.72, 0.8, 0.8, 0.95, 1.0, 1.0]
    got = similarity_summary(np.array(values))
    counts = [0] * 20
    for v in values:
        counts[min(int(v * 20 + 1e-9), 19)] += 1  # the last bin holds 1.0
    assert [b["count"] for b in got["histogram"]] == counts  # type: ignore[index]
    assert got["quantiles"]["0.5"] == pytest.approx(0.8)  # type: ignore[index]
    assert got["quantiles"]["0"] == 0.0 and got["quantiles"]["1"] == 1.0  # type: ignore[index]
