"""What `neardup tune` computes from a banding: its S-curve, its error areas, and a test of
a measured curve against it. Pure numpy and math; no Spark.

A pair of Jaccard similarity s shares at least one of b bands of r MinHash slots with
probability P(s) = 1 - (1 - s^r)^b (`bands.candidate_probability`). The error areas are
the false-positive area FP = integral of P over [0, t] and the false-negative area
FN = integral of 1 - P over [t, 1], the quantities `bands.optimal_bands` weighs.

The measured curve is a set of pairs, each with its exact similarity s_i and whether it
collided. Pairs are tallied in similarity bins ([0, 0.3), then 0.05 wide up to 1.0
inclusive); a bin of n pairs with O collisions has the expected count E = sum of P(s_i)
over its pairs. The test is Pearson's chi-square goodness of fit of the binomial counts:
each group of bins contributes (O - E)^2 / E + (O - E)^2 / (n - E), the two cells
(collided, not collided) with expected probability the mean of P(s_i) in the group, and
the statistic has one degree of freedom per group, since (b, r) are fixed beforehand, not
fitted to the counts. Adjacent bins are merged until each group expects at least 5
collisions and 5 misses (Cochran's rule for the chi-square approximation). Using the
mean probability overstates the variance of a bin whose P(s_i) differ, which makes the
test slightly conservative, never anti-conservative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup.kernels.bands import candidate_probability

F64Array = npt.NDArray[np.float64]
I64Array = npt.NDArray[np.int64]

CURVE_START, CURVE_STOP, CURVE_STEP = 0.3, 1.0, 0.05
LOW_EDGE, BIN_WIDTH = 0.3, 0.05  # bins: [0, LOW_EDGE), then BIN_WIDTH wide up to 1.0
MIN_EXPECTED = 5.0  # each merged group expects at least this many collisions and misses

# Composite Gauss-Legendre: P is a polynomial of degree b * r, which 128 nodes integrate
# exactly on each piece up to degree 255 (every banding of up to 255 slots); beyond that
# the 16 pieces keep the error far below what the table prints.
_NODES, _PIECES = 128, 16


def curve_points(start: float = CURVE_START, stop: float = CURVE_STOP, step: float = CURVE_STEP) -> F64Array:
    """Similarities start, start + step, ..., stop (rounded, so 0.35 prints as 0.35)."""
    count = round((stop - start) / step) + 1
    return np.round(start + step * np.arange(count), 10)


def _integral(fn: str, lo: float, hi: float, bands: int, rows: int) -> float:
    if hi <= lo:
        return 0.0
    x, w = np.polynomial.legendre.leggauss(_NODES)
    edges = np.linspace(lo, hi, _PIECES + 1)
    half = (edges[1:] - edges[:-1])[:, None] / 2
    mid = (edges[1:] + edges[:-1])[:, None] / 2
    s = mid + half * x[None, :]
    # 1 - P is computed as (1 - s^r)^b, not 1 - P: no cancellation where P is near 1.
    ys = candidate_probability(s, bands, rows) if fn == "p" else (1.0 - s**rows) ** bands
    return float(np.sum(half * w[None, :] * ys))


def error_areas(threshold: float, bands: int, rows: int) -> tuple[float, float]:
    """(false-positive area, false-negative area) of (bands, rows) at `threshold`."""
    fp = _integral("p", 0.0, threshold, bands, rows)
    fn = _integral("q", threshold, 1.0, bands, rows)
    return fp, fn


def bin_edges(low: float = LOW_EDGE, width: float = BIN_WIDTH) -> F64Array:
    """[0, low, low + width, ..., 1.0]."""
    return np.concatenate([[0.0], curve_points(low, 1.0, width)])


@dataclass(frozen=True)
class Bins:
    """Pairs tallied by similarity: bin i is [lo[i], hi[i]) (the last one includes 1.0)."""

    lo: F64Array
    hi: F64Array
    pairs: I64Array
    collided: I64Array
    expected: F64Array  # sum of P(s_i) over the bin's pairs: its expected collisions


def tally(
    similarity: npt.ArrayLike, collided: npt.ArrayLike, bands: int, rows: int, edges: F64Array | None = None
) -> Bins:
    """Pairs, collisions and expected collisions under (bands, rows) per similarity bin."""
    e = bin_edges() if edges is None else np.asarray(edges, dtype=np.float64)
    s = np.asarray(similarity, dtype=np.float64)
    hit = np.asarray(collided, dtype=bool)
    if s.shape != hit.shape or s.ndim != 1:
        raise ValueError("similarity and collided must be 1-d arrays of the same length")
    if s.size and (s.min() < 0.0 or s.max() > 1.0):
        raise ValueError("similarities must be in [0, 1]")
    nbins = len(e) - 1
    idx = np.clip(np.searchsorted(e, s, side="right") - 1, 0, nbins - 1)
    p = candidate_probability(s, bands, rows)
    return Bins(
        lo=e[:-1].copy(),
        hi=e[1:].copy(),
        pairs=np.bincount(idx, minlength=nbins).astype(np.int64),
        collided=np.bincount(idx, weights=hit, minlength=nbins).round().astype(np.int64),
        expected=np.bincount(idx, weights=p, minlength=nbins).astype(np.float64),
    )


def merge_groups(
    pairs: npt.ArrayLike, expected: npt.ArrayLike, min_expected: float = MIN_EXPECTED
) -> I64Array:
    """Group id per bin (-1 for a bin without pairs): adjacent bins, in order, merged until
    a group expects at least `min_expected` collisions and as many misses; a remainder
    that does not joins the group before it. All -1 when even all bins together fall short.
    """
    n = np.asarray(pairs, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    group = np.full(len(n), -1, dtype=np.int64)
    current, acc_n, acc_e, open_bins = 0, 0.0, 0.0, []
    for i in range(len(n)):  # one step per bin (about 15), never per pair
        if n[i] == 0:
            continue
        open_bins.append(i)
        acc_n += n[i]
        acc_e += e[i]
        if acc_e >= min_expected and acc_n - acc_e >= min_expected:
            group[open_bins] = current
            current, acc_n, acc_e, open_bins = current + 1, 0.0, 0.0, []
    if open_bins:
        group[open_bins] = current - 1 if current > 0 else -1
    return group


@dataclass(frozen=True)
class GoodnessOfFit:
    """Pearson's chi-square of observed against expected collisions over groups of bins."""

    statistic: float
    df: int
    p_value: float
    groups: I64Array  # group id per bin (-1: no pairs, or not enough expected counts)

    def rejects(self, alpha: float) -> bool:
        return self.p_value < alpha


def goodness_of_fit(
    pairs: npt.ArrayLike,
    collided: npt.ArrayLike,
    expected: npt.ArrayLike,
    min_expected: float = MIN_EXPECTED,
) -> GoodnessOfFit | None:
    """The test of the module docstring; None when no group reaches `min_expected`."""
    n = np.asarray(pairs, dtype=np.float64)
    o = np.asarray(collided, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    groups = merge_groups(n, e, min_expected)
    df = int(groups.max()) + 1 if groups.size else 0
    if df == 0:
        return None
    used = groups >= 0
    gn = np.bincount(groups[used], weights=n[used], minlength=df)
    go = np.bincount(groups[used], weights=o[used], minlength=df)
    ge = np.bincount(groups[used], weights=e[used], minlength=df)
    statistic = float(np.sum((go - ge) ** 2 / ge + (go - ge) ** 2 / (gn - ge)))
    return GoodnessOfFit(statistic, df, chi2_sf(statistic, df), groups)


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with `df` degrees of freedom: Q(df / 2, x / 2), the
    regularized upper incomplete gamma function."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if x <= 0.0:
        return 1.0
    return _gamma_q(df / 2.0, x / 2.0)


def _gamma_q(a: float, x: float) -> float:
    # x^a e^-x / Gamma(a), the common factor of both expansions, in logs (no overflow).
    front = math.exp(a * math.log(x) - x - math.lgamma(a))
    if x < a + 1.0:
        # P(a, x) = front * sum_k x^k / (a (a+1) ... (a+k)): its terms shrink fast here.
        term = total = 1.0 / a
        k = a
        while abs(term) > abs(total) * 1e-17:
            k += 1.0
            term *= x / k
            total += term
        return max(0.0, 1.0 - front * total)
    # Q(a, x) = front / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...))),
    # Legendre's continued fraction, evaluated forwards (modified Lentz).
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            break
    return front * h


def binomial_range(n: int, p: float, level: float) -> tuple[int, int]:
    """The central `level` interval [lo, hi] of Binomial(n, p): the largest lo with
    P(X < lo) <= (1 - level) / 2 and the smallest hi with P(X > hi) <= (1 - level) / 2."""
    if n <= 0 or p <= 0.0:
        return 0, 0
    if p >= 1.0:
        return n, n
    k = np.arange(n + 1, dtype=np.float64)
    # log C(n, k) = sum over i = 1..k of log((n - i + 1) / i), accumulated without a loop.
    log_comb = np.concatenate([[0.0], np.cumsum(np.log(n - k[1:] + 1.0) - np.log(k[1:]))])
    logpmf = log_comb + k * math.log(p) + (n - k) * math.log1p(-p)
    pmf = np.exp(logpmf - logpmf.max())
    pmf /= pmf.sum()
    tail = (1.0 - level) / 2.0
    below = np.cumsum(pmf) - pmf  # P(X < k)
    above = np.cumsum(pmf[::-1])[::-1] - pmf  # P(X > k)
    lo = int(np.flatnonzero(below <= tail)[-1])
    hi = int(np.flatnonzero(above <= tail)[0])
    return lo, hi
