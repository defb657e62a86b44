"""`neardup tune --input` as a user runs it (cli.main in this process, on the tests' local
session) on a generated corpus whose similar pairs are spread over [0.3, 1]: the banding
and the curve it prints against independent computations; the measured curve within
binomial bounds and the test not rejecting where the model holds; the same sample from
another format and partitioning; and the test rejecting a curve that is not the one the
collisions came from."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow.dataset as ds
import pytest

from neardup import cli
from neardup.kernels.scurve_fit import goodness_of_fit
from neardup_testkit.synth import CorpusSpec, generate, write_jsonl_gz

ALPHA = 0.01  # the level the test is run at; the bins are checked at 99.9 %


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    # Pairs (clusters of 2) of a base and an edited copy at a Jaccard drawn from [0.3, 1),
    # and documents alone, which give the pairs of low similarity.
    copies = {"exact_copy_fraction": 0.0, "format_copy_fraction": 0.0}
    table = generate(
        CorpusSpec(2000, seed=17, mean_chars=1200, dup_fraction=0.7, max_cluster_size=2, **copies)
    )
    root = tmp_path_factory.mktemp("tune")
    parquet = root / "parquet"
    # Three files, read as three partitions at least; the JSON Lines copy is one file.
    ds.write_dataset(table, parquet, format="parquet", max_rows_per_file=700, max_rows_per_group=700)
    jsonl = root / "corpus.jsonl.gz"
    write_jsonl_gz(table, jsonl)
    return {"parquet": str(parquet), "jsonl": str(jsonl)}


def _tune(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["tune", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def measured(spark: Any, corpus: dict[str, str]) -> dict[str, Any]:
    """One run with the defaults (captured by hand: capsys is per test)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(["tune", "--input", corpus["parquet"], "--json", "--alpha", str(ALPHA)]) == 0
    return dict(json.loads(buf.getvalue()))


def _fp_area_by_midpoints(t: float, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    xs = (np.arange(20_000) + 0.5) / 20_000 * t
    return np.array([np.sum(1 - (1 - xs**rr) ** bb) * t / xs.size for bb, rr in zip(b, r, strict=True)])


def test_the_banding_and_curve_are_the_independent_ones(measured: dict[str, Any]) -> None:
    t, k, recall = 0.8, 128, 0.999
    # The recall rule by brute force: the least false-positive area with P(t) >= recall.
    b, r = np.array([(b, r) for r in range(1, k + 1) for b in range(1, k // r + 1)]).T
    ok = 1 - (1 - t**r) ** b >= recall
    areas = _fp_area_by_midpoints(t, b[ok], r[ok])
    best = np.lexsort((b[ok], areas))[0]
    assert (measured["bands"], measured["rows"]) == (int(b[ok][best]), int(r[ok][best])) == (18, 5)
    curve = measured["s_curve"]
    assert [p["similarity"] for p in curve] == [round(0.3 + 0.05 * i, 2) for i in range(15)]
    for p in curve:
        assert p["probability"] == pytest.approx(1 - (1 - p["similarity"] ** 5) ** 18, abs=1e-15)
    tf = Fraction(t)
    terms = [(math.comb(18, j) * (-1) ** j, 5 * j + 1) for j in range(19)]
    fp = tf - sum(Fraction(c, d) * tf**d for c, d in terms)
    fn = sum(Fraction(c, d) * (1 - tf**d) for c, d in terms)
    assert measured["false_positive_area"] == pytest.approx(float(fp), rel=1e-12)
    assert measured["false_negative_area"] == pytest.approx(float(fn), rel=1e-9)


def _central(n: int, p: float, level: float) -> tuple[int, int]:
    """The central interval of Binomial(n, p), summed term by term."""
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    tail = (1 - level) / 2
    lo = max(k for k in range(n + 1) if sum(pmf[:k]) <= tail)
    hi = min(k for k in range(n + 1) if sum(pmf[k + 1 :]) <= tail)
    return lo, hi


def test_the_measured_curve_agrees_with_the_model(measured: dict[str, Any]) -> None:
    m = measured["measured"]
    sample = m["sample"]
    # The whole corpus fits in the sample; no exact copies were planted.
    assert (sample["smallest"], sample["documents"], sample["distinct"]) == (2000, 2000, 2000)
    bins = m["bins"]
    assert [(row["low"], row["high"]) for row in bins] == [
        (0.0, 0.3),
        *((round(0.3 + 0.05 * i, 2), round(0.35 + 0.05 * i, 2)) for i in range(14)),
    ]
    assert sum(row["pairs"] for row in bins) == sample["pairs"] <= 1000
    assert all(row["pairs"] >= 25 for row in bins), bins  # pairs spread over the range
    for row in bins:
        lo, hi = _central(row["pairs"], row["expected"], 0.999)
        assert lo <= row["collided"] <= hi, row
    test = m["test"]
    assert test["name"] == "Pearson chi-square goodness of fit"
    assert test["df"] >= 5 and test["alpha"] == ALPHA
    assert test["rejects"] is False and test["p_value"] >= ALPHA


def test_another_format_and_partitioning_gives_the_same_sample(
    spark: Any, corpus: dict[str, str], measured: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _tune(capsys, "--input", corpus["jsonl"], "--json", "--alpha", str(ALPHA))
    assert code == 0
    again = json.loads(out)
    assert again["measured"].pop("input") == corpus["jsonl"]
    first = dict(measured["measured"])
    first.pop("input")
    assert again["measured"] == first


def _table_bins(out: str) -> list[tuple[int, int]]:
    """(pairs, collided) of each bin row of the printed table."""
    rows = []
    for line in out.splitlines():
        if line.startswith("  [") and "," in line:
            fields = line.split("]" if "]" in line else ")", 1)[1].split()
            rows.append((int(fields[0].replace(",", "")), int(fields[1].replace(",", ""))))
    return rows


def test_the_test_rejects_collisions_of_another_banding(
    spark: Any, corpus: dict[str, str], measured: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _tune(capsys, "--input", corpus["parquet"], "--bands", "9", "--rows", "10")
    assert code == 0
    assert "bands x rows: 9 x 10 = 90 of 128 slots (lsh.bands and lsh.rows as set)" in out
    assert "S-curve: P(s) = 1 - (1 - s^10)^9" in out
    assert "  0.60  " + f"{1 - (1 - 0.6**10) ** 9:.6f}" in out.splitlines()
    assert "(not rejected)" in out
    other = _table_bins(out)
    mine = measured["measured"]["bins"]
    # The same pairs (the selection never reads the job's signatures or banding) ...
    assert [n for n, _ in other] == [row["pairs"] for row in mine]
    pairs = np.array([n for n, _ in other])
    expected = np.array([row["expected"] * row["pairs"] for row in mine])  # under 18 x 5
    # ... whose 9 x 10 collisions do not fit the 18 x 5 curve, nor the 18 x 5 ones 9 x 10.
    fit = goodness_of_fit(pairs, np.array([o for _, o in other]), expected)
    assert fit is not None and fit.rejects(ALPHA), fit
    assert fit.p_value < 1e-6


@pytest.mark.compat  # the readers' errors differ between the Spark lines
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--input", "/nonexistent/corpus.parquet"], 2, "input /nonexistent/corpus.parquet does not exist"),
        (["--id-col", "nope"], 3, "no id column 'nope'"),
    ],
)
def test_input_errors_are_one_line(
    spark: Any,
    corpus: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    code: int,
    message: str,
) -> None:
    if "--input" not in args:
        args = ["--input", corpus["parquet"], *args]
    got, out, err = _tune(capsys, *args)
    assert got == code
    lines = [line for line in err.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert out == "" and "Traceback" not in err


def test_a_sample_bound_by_bytes(
    spark: Any, corpus: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _tune(
        capsys, "--input", corpus["parquet"], "--json", "--sample", "500", "--sample-bytes", "100k"
    )
    assert code == 0
    sample = json.loads(out)["measured"]["sample"]
    assert sample["smallest"] == 500 and sample["max_bytes"] == 100 * 1024
    assert 0 < sample["text_bytes"] <= 100 * 1024 and sample["documents"] < 500
