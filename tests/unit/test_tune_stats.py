"""kernels/scurve_fit.py against independent computations: exact rational integrals of the
S-curve, closed forms of the chi-square tail, a hand computation of the statistic,
binomial tails summed with math.comb, and the test's behaviour on simulated counts."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from neardup.kernels.scurve_fit import (
    bin_edges,
    binomial_range,
    chi2_sf,
    curve_points,
    error_areas,
    goodness_of_fit,
    merge_groups,
    tally,
)


def _exact_areas(t: float, b: int, r: int) -> tuple[Fraction, Fraction]:
    """FP and FN by expanding (1 - s^r)^b = sum_j C(b, j) (-1)^j s^(r j) and integrating
    each monomial, in exact rational arithmetic (no cancellation can hurt a Fraction)."""
    tf = Fraction(t)
    below = sum(Fraction(math.comb(b, j) * (-1) ** j, r * j + 1) * tf ** (r * j + 1) for j in range(b + 1))
    above = sum(
        Fraction(math.comb(b, j) * (-1) ** j, r * j + 1) * (1 - tf ** (r * j + 1)) for j in range(b + 1)
    )
    return tf - below, above


@pytest.mark.parametrize(
    ("t", "b", "r"),
    [(0.8, 18, 5), (0.8, 16, 6), (0.8, 12, 10), (0.5, 20, 3), (0.9, 8, 16), (0.7, 32, 8), (0.6, 1, 1)],
)
def test_error_areas_are_the_exact_integrals(t: float, b: int, r: int) -> None:
    fp, fn = error_areas(t, b, r)
    want_fp, want_fn = _exact_areas(t, b, r)
    assert fp == pytest.approx(float(want_fp), rel=1e-12, abs=1e-15)
    assert fn == pytest.approx(float(want_fn), rel=1e-9, abs=1e-15)


def test_error_areas_of_a_wide_banding_match_fine_quadrature() -> None:
    # 64 x 64 = 4096 slots: past the degree the Gauss-Legendre pieces integrate exactly.
    t, b, r = 0.95, 64, 64
    xs = (np.arange(2_000_000) + 0.5) / 2_000_000
    p = 1 - (1 - xs**r) ** b
    fp = float(np.sum(np.where(xs < t, p, 0.0)) / xs.size)
    fn = float(np.sum(np.where(xs >= t, 1 - p, 0.0)) / xs.size)
    got_fp, got_fn = error_areas(t, b, r)
    assert got_fp == pytest.approx(fp, abs=1e-6)
    assert got_fn == pytest.approx(fn, abs=1e-6)


def test_curve_points_and_bins() -> None:
    assert curve_points().tolist() == [round(0.3 + 0.05 * i, 2) for i in range(15)]
    assert bin_edges().tolist() == [0.0, *(round(0.3 + 0.05 * i, 2) for i in range(15))]


def test_tally_counts_each_pair_in_its_bin() -> None:
    rng = np.random.default_rng(3)
    s = np.concatenate([rng.random(500), [0.0, 0.3, 0.35, 0.95, 1.0]])
    hit = rng.random(s.size) < s
    bins = tally(s, hit, 18, 5)
    edges = [0.0, *(round(0.3 + 0.05 * i, 2) for i in range(15))]
    for i in range(15):
        lo, hi = edges[i], edges[i + 1]
        members = [k for k in range(s.size) if lo <= s[k] < hi or (i == 14 and s[k] == 1.0)]
        assert bins.pairs[i] == len(members)
        assert bins.collided[i] == sum(bool(hit[k]) for k in members)
        assert bins.expected[i] == pytest.approx(sum(1 - (1 - float(s[k]) ** 5) ** 18 for k in members))


def test_sparse_bins_are_merged_with_their_neighbours() -> None:
    pairs = [100, 0, 10, 10, 10, 40, 30, 3]
    expected = [0.1, 0.0, 2.0, 4.0, 6.0, 30.0, 29.0, 3.0]
    # 100 pairs expecting 0.1 + 2 + 4 collisions reach 5 expected collisions and 93.9 misses
    # at bin 3; bin 4 (6 of 10) alone has too few misses, so it takes bin 5; bins 6 and 7
    # together still expect only 1 miss: they join the group before them.
    assert merge_groups(pairs, expected).tolist() == [0, -1, 0, 0, 1, 1, 1, 1]
    assert merge_groups([10, 10], [1.0, 1.0]).tolist() == [-1, -1]


def test_goodness_of_fit_by_hand() -> None:
    pairs = [50, 40, 30]
    collided = [8, 25, 27]
    expected = [10.0, 20.0, 25.0]  # group 2 expects 5 misses: every bin is its own group
    # (O - E)^2 / E + (O - E)^2 / (n - E), per bin
    by_hand = 4 / 10 + 4 / 40 + 25 / 20 + 25 / 20 + 4 / 25 + 4 / 5
    fit = goodness_of_fit(pairs, collided, expected)
    assert fit is not None
    assert fit.df == 3 and fit.groups.tolist() == [0, 1, 2]
    assert fit.statistic == pytest.approx(by_hand)
    # chi-square with 3 degrees of freedom: erfc(sqrt(x/2)) + sqrt(2x/pi) exp(-x/2)
    x = by_hand
    assert fit.p_value == pytest.approx(
        math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
    )
    assert goodness_of_fit([3], [1], [1.0]) is None


@pytest.mark.parametrize("x", [0.0, 0.01, 0.5, 1.0, 2.5, 7.3, 15.0, 40.0, 120.0, 400.0])
def test_chi2_sf_matches_closed_forms(x: float) -> None:
    # Even df = 2k: exp(-x/2) sum_{i<k} (x/2)^i / i!; df = 1: erfc(sqrt(x/2)).
    for k in (1, 2, 3, 5, 10, 30):
        want = math.exp(-x / 2) * sum((x / 2) ** i / math.factorial(i) for i in range(k))
        assert chi2_sf(x, 2 * k) == pytest.approx(want, rel=1e-10, abs=1e-300)
    assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-10, abs=1e-300)
    want3 = math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
    assert chi2_sf(x, 3) == pytest.approx(want3, rel=1e-10, abs=1e-300)


def test_chi2_sf_at_known_critical_values() -> None:
    # Tabulated 95 % and 99 % points of the chi-square distribution.
    for df, x95, x99 in [(1, 3.841459, 6.634897), (6, 12.591587, 16.811894), (14, 23.684791, 29.141238)]:
        assert chi2_sf(x95, df) == pytest.approx(0.05, rel=1e-5)
        assert chi2_sf(x99, df) == pytest.approx(0.01, rel=1e-5)


@pytest.mark.parametrize(("n", "p"), [(1, 0.5), (20, 0.07), (37, 0.5), (200, 0.93), (500, 0.002), (12, 1.0)])
def test_binomial_range_is_the_central_interval(n: int, p: float) -> None:
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo, hi = binomial_range(n, p, 0.99)
    assert sum(pmf[:lo]) <= 0.005 + 1e-12 and sum(pmf[: lo + 1]) > 0.005 - 1e-12
    assert sum(pmf[hi + 1 :]) <= 0.005 + 1e-12 and sum(pmf[hi:]) > 0.005 - 1e-12


def _simulate(rng: np.random.Generator, b: int, r: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.concatenate([rng.random(n // 3) * 0.3, 0.3 + 0.7 * rng.random(n - n // 3)])
    return s, rng.random(n) < 1 - (1 - s**r) ** b


def test_the_test_holds_its_level_under_the_model() -> None:
    """Under the model the test rejects at 5 % in about 5 % of samples: 400 samples give
    between 9 and 33 rejections with probability 0.998 (binomial(400, 0.05))."""
    rng = np.random.default_rng(20)
    rejections = 0
    for _ in range(400):
        s, hit = _simulate(rng, 18, 5, 700)
        bins = tally(s, hit, 18, 5)
        fit = goodness_of_fit(bins.pairs, bins.collided, bins.expected)
        assert fit is not None
        rejections += fit.rejects(0.05)
    assert 9 <= rejections <= 33


def test_the_test_rejects_the_wrong_curve() -> None:
    """Collisions drawn from 9 x 10 bands, tested against the curve of 18 x 5 (and back)."""
    rng = np.random.default_rng(21)
    for true, claimed in [((9, 10), (18, 5)), ((18, 5), (9, 10)), ((16, 6), (18, 5))]:
        s, hit = _simulate(rng, *true, 700)
        wrong = tally(s, hit, *claimed)
        fit = goodness_of_fit(wrong.pairs, wrong.collided, wrong.expected)
        assert fit is not None and fit.rejects(0.01), (true, claimed, fit)
        right = tally(s, hit, *true)
        fit = goodness_of_fit(right.pairs, right.collided, right.expected)
        assert fit is not None and not fit.rejects(0.01), (true, fit)
