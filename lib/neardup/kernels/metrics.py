"""Scores of a clustering: pair precision, recall and F1, the adjusted Rand index, and
the summaries `neardup evaluate` prints. Pure numpy; no Spark.

Pairs are never listed: a clustering of n documents into clusters of sizes a_i holds
sum C(a_i, 2) pairs, and two clusterings share sum C(n_ij, 2), where n_ij counts the
documents in predicted cluster i and true cluster j (the contingency table). The
adjusted Rand index (Hubert and Arabie, 1985) is the Rand index corrected for chance:
(index - expected) / (max - expected) over those same pair counts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


def pairs_of(sizes: np.ndarray) -> int:
    """sum C(size, 2), exactly (Python integers: no overflow at billions of documents)."""
    s = np.asarray(sizes, dtype=np.int64)
    return int(sum(int(x) * (int(x) - 1) // 2 for x in s[s > 1]))


@dataclass(frozen=True)
class PairCounts:
    together: int  # pairs in one predicted cluster and one true cluster (or a true pair)
    predicted: int  # pairs in one predicted cluster
    true: int  # true pairs
    all_pairs: int  # C(n, 2)


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    adjusted_rand_index: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def scores(p: PairCounts) -> Scores:
    """Pair precision, recall, F1 and the adjusted Rand index from pair counts. With no
    predicted pairs precision is 1 (nothing claimed); with no true pairs recall is 1."""
    precision = p.together / p.predicted if p.predicted else 1.0
    recall = p.together / p.true if p.true else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    expected = p.predicted * p.true / p.all_pairs if p.all_pairs else 0.0
    top = (p.predicted + p.true) / 2
    ari = (p.together - expected) / (top - expected) if top != expected else 1.0
    return Scores(precision, recall, f1, ari)


def wilson(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % by default): honest near
    0 and 1, where the normal approximation is not."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    low = (centre - spread) / (1 + z * z / trials)
    high = (centre + spread) / (1 + z * z / trials)
    return (max(0.0, low), min(1.0, high))


QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)


def similarity_summary(values: np.ndarray, bins: int = 20) -> dict[str, object]:
    """A histogram of similarities over [0, 1] in `bins` equal bins (the last closed),
    and the quantiles in QUANTILES (linear interpolation)."""
    v = np.asarray(values, dtype=np.float64)
    # Bin i holds [i / bins, (i + 1) / bins): floor(v * bins), with a hair of slack so a
    # value such as 0.95 lands in the bin its label starts with (np.histogram's edge
    # 19 * 0.05 is 0.9500000000000001, which would put 0.95 one bin lower).
    index = np.clip(np.floor(v * bins + 1e-9).astype(np.int64), 0, bins - 1)
    counts = np.bincount(index, minlength=bins)
    edges = np.arange(bins + 1) / bins
    qs = np.quantile(v, QUANTILES) if len(v) else np.full(len(QUANTILES), np.nan)
    return {
        "histogram": [
            {"from": round(float(lo), 4), "to": round(float(hi), 4), "count": int(c)}
            for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
        ],
        "quantiles": {
            f"{q:g}": None if math.isnan(x) else round(float(x), 6)
            for q, x in zip(QUANTILES, qs, strict=True)
        },
    }
