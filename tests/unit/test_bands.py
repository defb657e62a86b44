"""Band math against an independent computation (scipy-free closed forms and brute force)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from neardup.kernels.bands import bands_for_recall, candidate_probability, optimal_bands, s_curve


def _simulated_probability(s: float, b: int, r: int, trials: int, rng: np.random.Generator) -> float:
    # A band collides when all r rows agree; each agrees with probability s.
    agree = rng.random((trials, b, r)) < s
    return float(agree.all(axis=2).any(axis=1).mean())


def test_candidate_probability_matches_simulation() -> None:
    rng = np.random.default_rng(1)
    for s, b, r in [(0.5, 9, 13), (0.8, 12, 10), (0.9, 20, 5), (0.3, 4, 2)]:
        p = float(candidate_probability(s, b, r))
        sim = _simulated_probability(s, b, r, 40_000, rng)
        assert abs(p - sim) < 4 * math.sqrt(p * (1 - p) / 40_000) + 1e-3


def _weighted_error(t: float, b: int, r: int, wfp: float, wfn: float) -> float:
    # Independent quadrature: midpoint rule on a fine grid.
    xs = (np.arange(20_000) + 0.5) / 20_000
    p = 1 - (1 - xs**r) ** b
    fp = np.sum(np.where(xs < t, p, 0.0)) / 20_000
    fn = np.sum(np.where(xs >= t, 1 - p, 0.0)) / 20_000
    return float(wfp * fp + wfn * fn)


def test_optimal_bands_is_the_brute_force_minimum() -> None:
    for t, k, wfp, wfn in [(0.8, 64, 0.5, 0.5), (0.5, 32, 0.2, 0.8), (0.9, 48, 0.5, 0.5)]:
        b, r = optimal_bands(t, k, wfp, wfn)
        best = min(
            (_weighted_error(t, bb, rr, wfp, wfn), bb, rr)
            for bb in range(1, k + 1)
            for rr in range(1, k // bb + 1)
        )
        assert _weighted_error(t, b, r, wfp, wfn) <= best[0] + 1e-4


def test_s_curve_is_monotone_from_zero_to_one() -> None:
    pts = s_curve(12, 10)
    ps = [p["probability"] for p in pts]
    assert ps[0] == 0.0 and ps[-1] == 1.0
    assert all(a <= b for a, b in itertools.pairwise(ps))


def test_bands_for_recall_is_the_brute_force_choice() -> None:
    for t, k, recall in [(0.8, 128, 0.99), (0.8, 128, 0.999), (0.5, 64, 0.95), (0.9, 32, 0.9)]:
        found = bands_for_recall(t, k, recall)
        feasible = [
            (_weighted_error(t, bb, rr, 1.0, 0.0), bb, rr)
            for bb in range(1, k + 1)
            for rr in range(1, k // bb + 1)
            if 1 - (1 - t**rr) ** bb >= recall
        ]
        assert found is not None and feasible
        b, r = found
        assert 1 - (1 - t**r) ** b >= recall
        assert _weighted_error(t, b, r, 1.0, 0.0) <= min(feasible)[0] + 1e-4


def test_bands_for_recall_out_of_reach_is_none() -> None:
    # With 4 slots, the best single-row banding at t=0.1 is 1 - 0.9^4 = 0.34.
    assert bands_for_recall(0.1, 4, 0.5) is None
