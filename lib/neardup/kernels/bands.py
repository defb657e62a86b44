"""LSH band math: the S-curve and the choice of (bands, rows) (band keys: minhash.py).

Pure numpy; no Spark. A pair of similarity s becomes a candidate with
probability P(s) = 1 - (1 - s^r)^b. Given a threshold t we pick (b, r) with
b * r <= k minimizing  w_fp * FP(b, r) + w_fn * FN(b, r), where
FP = integral of P over [0, t] (dissimilar pairs let through) and
FN = integral of 1 - P over [t, 1] (similar pairs missed).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_GRID = 2001  # trapezoid points per unit interval: error far below the gaps between (b, r) choices


def candidate_probability(s: np.ndarray | float, bands: int, rows: int) -> np.ndarray:
    s = np.asarray(s, dtype=np.float64)
    return 1.0 - (1.0 - s**rows) ** bands


def _area(lo: float, hi: float, bands: int, rows: int, miss: bool) -> float:
    xs = np.linspace(lo, hi, _GRID)
    p = candidate_probability(xs, bands, rows)
    ys = 1.0 - p if miss else p
    return float(np.trapezoid(ys, xs))


@lru_cache(maxsize=256)
def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) minimizing the weighted error areas; ties go to fewer bands."""
    best: tuple[float, int, int] | None = None
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = _area(0.0, threshold, b, r, miss=False)
            fn = _area(threshold, 1.0, b, r, miss=True)
            err = fp_weight * fp + fn_weight * fn
            if best is None or err < best[0] - 1e-15:
                best = (err, b, r)
    assert best is not None
    return best[1], best[2]


@lru_cache(maxsize=256)
def bands_for_recall(threshold: float, num_perm: int, recall: float) -> tuple[int, int] | None:
    """(bands, rows) with P(threshold) >= recall and the least false-positive area below
    the threshold (ties: fewer bands, then fewer rows); None when no b * r <= num_perm reaches it.

    For verified candidates: a false candidate costs one comparison, a missed pair is lost
    for good, so recall at the threshold is the constraint and false candidates the cost.
    """
    best: tuple[float, int, int] | None = None
    for r in range(1, num_perm + 1):
        for b in range(1, num_perm // r + 1):
            if float(candidate_probability(threshold, b, r)) < recall:
                continue
            # The smallest b reaching the recall has the least false-positive area for this r.
            fp = _area(0.0, threshold, b, r, miss=False)
            if best is None or fp < best[0] - 1e-15 or (abs(fp - best[0]) <= 1e-15 and b < best[1]):
                best = (fp, b, r)
            break
    return None if best is None else (best[1], best[2])


def s_curve(bands: int, rows: int, points: int = 21) -> list[dict[str, float]]:
    """P(candidate | s) at evenly spaced s in [0, 1], for report.json."""
    xs = np.linspace(0.0, 1.0, points)
    ps = candidate_probability(xs, bands, rows)
    return [
        {"similarity": round(float(x), 4), "probability": round(float(p), 6)}
        for x, p in zip(xs, ps, strict=True)
    ]
