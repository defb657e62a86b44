"""`neardup tune`: the banding dedup would run with a config, its S-curve and error areas,
and, given a sample of the corpus, the curve measured on it and a test of the two.

No Spark here: `report` builds the plain data `--json` prints, `render` the table. The
measured part takes the driver-side pairs of `kernels.measure`; `commands.dedup.sample` draws
the documents. The math is in `kernels.scurve_fit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neardup.config import Config
from neardup.kernels.bands import bands_for_recall, candidate_probability, optimal_bands
from neardup.kernels.measure import MeasuredPairs
from neardup.kernels.scurve_fit import (
    LOW_EDGE,
    MIN_EXPECTED,
    binomial_range,
    curve_points,
    error_areas,
    goodness_of_fit,
    tally,
)
from neardup.runtime.memory import human

TEST_NAME = "Pearson chi-square goodness of fit"


def chosen_by(cfg: Config) -> str:
    """Which rule gives cfg's (bands, rows): the recall rule, the weighted areas, or the user."""
    t, k, lsh = cfg.lsh.threshold, cfg.minhash.num_perm, cfg.lsh
    if lsh.recall is not None and bands_for_recall(t, k, lsh.recall) == (cfg.bands, cfg.rows):
        return f"lsh.recall {lsh.recall:g}: the fewest false candidates with P({t:g}) >= {lsh.recall:g}"
    weights = (lsh.false_positive_weight, lsh.false_negative_weight)
    if lsh.recall is None and optimal_bands(t, k, *weights) == (cfg.bands, cfg.rows):
        fp, fn = weights
        return f"lsh.recall null: the least {fp:g} x false-positive + {fn:g} x false-negative area"
    return "lsh.bands and lsh.rows as set"


def theory(cfg: Config) -> dict[str, Any]:
    """The banding of cfg, its S-curve at 0.30, 0.35, ..., 1.00 and its error areas."""
    t, b, r = cfg.lsh.threshold, cfg.bands, cfg.rows
    fp, fn = error_areas(t, b, r)
    points = curve_points()
    return {
        "threshold": t,
        "num_perm": cfg.minhash.num_perm,
        "method": cfg.minhash.method,
        "bands": b,
        "rows": r,
        "chosen_by": chosen_by(cfg),
        "probability_at_threshold": float(candidate_probability(t, b, r)),
        "false_positive_area": fp,
        "false_negative_area": fn,
        "s_curve": [
            {"similarity": float(s), "probability": float(p)}
            for s, p in zip(points, candidate_probability(points, b, r), strict=True)
        ],
    }


@dataclass(frozen=True)
class SampleInfo:
    """What was asked of the sample and what it came to (from commands.dedup.sample)."""

    input: str
    size: int
    max_bytes: int
    smallest: int  # documents with the smallest sample keys (at most `size`)
    documents: int  # of them, those within max_bytes: the sample
    text_bytes: int


def measured(cfg: Config, info: SampleInfo, pairs: MeasuredPairs, alpha: float) -> dict[str, Any]:
    """Observed against expected collisions per similarity bin, and the test of their fit."""
    bins = tally(pairs.similarity, pairs.collided, cfg.bands, cfg.rows)
    rows = []
    for i in range(len(bins.pairs)):  # one row per bin (15), not per pair
        n, o, e = int(bins.pairs[i]), int(bins.collided[i]), float(bins.expected[i])
        if n == 0:
            continue
        lo, hi = binomial_range(n, e / n, 1.0 - alpha)
        rows.append(
            {
                "low": float(bins.lo[i]),
                "high": float(bins.hi[i]),
                "pairs": n,
                "collided": o,
                "observed": o / n,
                "expected": e / n,
                "range": [lo, hi],
            }
        )
    fit = goodness_of_fit(bins.pairs, bins.collided, bins.expected)
    test: dict[str, Any] = {"name": TEST_NAME, "alpha": alpha, "min_expected": MIN_EXPECTED}
    if fit is None:
        test |= {"statistic": None, "df": 0, "p_value": None, "rejects": None, "groups": []}
    else:
        groups = [
            [float(bins.lo[fit.groups == g].min()), float(bins.hi[fit.groups == g].max())]
            for g in range(fit.df)
        ]
        test |= {
            "statistic": fit.statistic,
            "df": fit.df,
            "p_value": fit.p_value,
            "rejects": fit.rejects(alpha),
            "groups": groups,
        }
    return {
        "input": info.input,
        "sample": {
            "size": info.size,
            "max_bytes": info.max_bytes,
            "smallest": info.smallest,
            "documents": info.documents,
            "text_bytes": info.text_bytes,
            "distinct": pairs.distinct,
            "candidate_pairs": pairs.candidates,
            "pairs": len(pairs.similarity),
            "similar_pairs": len(pairs.similarity) - pairs.random,
            "random_pairs": pairs.random,
        },
        "bins": rows,
        "test": test,
    }


def report(cfg: Config, measurement: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**theory(cfg), "measured": measurement}


def render(rep: dict[str, Any]) -> str:
    """The report as the table `neardup tune` prints."""
    t, b, r = rep["threshold"], rep["bands"], rep["rows"]
    lines = [
        f"neardup tune: lsh.threshold {t:g}, minhash.num_perm {rep['num_perm']} ({rep['method']})",
        f"bands x rows: {b} x {r} = {b * r} of {rep['num_perm']} slots ({rep['chosen_by']})",
        f"P({t:g}) = {rep['probability_at_threshold']:.6f}",
        f"false-positive area, integral of P over [0, {t:g}]:      {rep['false_positive_area']:.6f}",
        f"false-negative area, integral of 1 - P over [{t:g}, 1]:  {rep['false_negative_area']:.6f}",
        "",
        f"S-curve: P(s) = 1 - (1 - s^{r})^{b}",
        "     s      P(s)",
    ]
    lines += [f"  {p['similarity']:.2f}  {p['probability']:.6f}" for p in rep["s_curve"]]
    m = rep["measured"]
    if m is None:
        return "\n".join(lines)
    s = m["sample"]
    lines += [
        "",
        f"Measured on {m['input']}: {s['documents']:,} documents sampled ({human(s['text_bytes'])} of text"
        f"{_limit(s)}), {s['distinct']:,} after exact copies. {s['candidate_pairs']:,} candidate pairs from "
        f"an independent banding; measured: {s['similar_pairs']:,} of them of similarity >= {LOW_EDGE:g} and "
        f"{s['random_pairs']:,} random pairs, each document in one pair at most.",
        "",
        f"  similarity      pairs  collided  observed  expected  {100 * (1 - m['test']['alpha']):g}% range",
    ]
    for row in m["bins"]:
        close = "]" if row["high"] >= 1.0 else ")"
        lo, hi = row["range"]
        lines.append(
            f"  [{row['low']:.2f}, {row['high']:.2f}{close}  {row['pairs']:7,}  {row['collided']:8,}"
            f"  {row['observed']:8.4f}  {row['expected']:8.4f}  {lo:>6,} - {hi:,}"
        )
    lines += ["", _verdict(m["test"])]
    return "\n".join(lines)


def _limit(s: dict[str, Any]) -> str:
    if s["documents"] < s["smallest"]:
        return f", the {human(s['max_bytes'])} bound reached"
    if s["smallest"] < s["size"]:
        return ", every document"
    return ""


def _verdict(test: dict[str, Any]) -> str:
    rule = f"bins merged until each group expects >= {test['min_expected']:g} collisions and misses"
    if test["statistic"] is None:
        return f"{test['name']}: not applicable, too few pairs ({rule}); sample more documents."
    agree = (
        "the observed collisions depart from the S-curve (rejected)"
        if test["rejects"]
        else "the observed collisions agree with the S-curve (not rejected)"
    )
    return (
        f"{test['name']} over {test['df']} group(s) of bins ({rule}): X^2 = {test['statistic']:.2f}, "
        f"df = {test['df']}, p = {test['p_value']:.4g}; at alpha = {test['alpha']:g} {agree}."
    )
