"""`neardup tune` without an input, through the command line's entry (`neardup.cli.main`,
in this process, no Spark: the theory needs none): the printed banding, curve and areas
against independent computations, the flags and config layers it shares with dedup, and
one-line errors with their exit codes. That it loads no Spark is checked in a fresh
interpreter, whose sys.modules nothing else has filled. (With --input:
tests/spark/test_tune.py.)"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from inprocess import neardup

ROOT = Path(__file__).resolve().parents[2]


def _areas(t: float, b: int, r: int) -> tuple[float, float]:
    """Exact integrals of P over [0, t] and of 1 - P over [t, 1], in rationals."""
    tf = Fraction(t)
    terms = [(math.comb(b, j) * (-1) ** j, r * j + 1) for j in range(b + 1)]
    fp = tf - sum(Fraction(c, d) * tf**d for c, d in terms)
    fn = sum(Fraction(c, d) * (1 - tf**d) for c, d in terms)
    return float(fp), float(fn)


def test_the_printed_table_is_the_default_banding(capsys: pytest.CaptureFixture[str]) -> None:
    ran = neardup(capsys, "tune")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    # README: 18 x 5 at 0.8 with 128 slots and lsh.recall 0.999.
    assert lines[0] == "neardup tune: lsh.threshold 0.8, minhash.num_perm 128 (oph)"
    assert lines[1].startswith("bands x rows: 18 x 5 = 90 of 128 slots (lsh.recall 0.999:")
    assert lines[2] == f"P(0.8) = {1 - (1 - 0.8**5) ** 18:.6f}"
    fp, fn = _areas(0.8, 18, 5)
    assert lines[3].split()[-1] == f"{fp:.6f}" and lines[4].split()[-1] == f"{fn:.6f}"
    start = lines.index("     s      P(s)") + 1
    want = [f"  {0.3 + 0.05 * i:.2f}  {1 - (1 - (0.3 + 0.05 * i) ** 5) ** 18:.6f}" for i in range(15)]
    assert lines[start:] == want


def test_flags_and_config_layers_give_what_dedup_would_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("lsh:\n  threshold: 0.6\nminhash:\n  num_perm: 64\n")
    # --config and --set as dedup reads them; --threshold and --num-perm win over both.
    ran = neardup(capsys, "tune", "--json", "--config", str(overlay), "--set", "lsh.recall=0.99")
    assert ran.code == 0, ran.err
    rep = json.loads(ran.out)
    assert (rep["threshold"], rep["num_perm"]) == (0.6, 64)
    b, r = rep["bands"], rep["rows"]
    # The recall rule by brute force: P(0.6) >= 0.99 with the least false-positive area.
    feasible = [
        (_areas(0.6, bb, rr)[0], bb, rr)
        for rr in range(1, 65)
        for bb in range(1, 64 // rr + 1)
        if 1 - (1 - 0.6**rr) ** bb >= 0.99
    ]
    assert (b, r) == min(feasible)[1:]
    assert rep["false_positive_area"] == pytest.approx(_areas(0.6, b, r)[0], rel=1e-12)
    assert rep["false_negative_area"] == pytest.approx(_areas(0.6, b, r)[1], rel=1e-9)
    assert [p["probability"] for p in rep["s_curve"]] == pytest.approx(
        [1 - (1 - (0.3 + 0.05 * i) ** r) ** b for i in range(15)], abs=1e-15
    )
    assert rep["measured"] is None
    flags = neardup(
        capsys, "tune", "--json", "--config", str(overlay), "--threshold", "0.9", "--num-perm", "256"
    )
    assert flags.code == 0, flags.err
    got = json.loads(flags.out)
    assert (got["threshold"], got["num_perm"]) == (0.9, 256)
    assert 1 - (1 - 0.9 ** got["rows"]) ** got["bands"] >= 0.999
    mine = neardup(capsys, "tune", "--json", "--bands", "20", "--rows", "5", "--set", "lsh.recall=null")
    assert json.loads(mine.out)["chosen_by"] == "lsh.bands and lsh.rows as set"


def test_tune_without_input_loads_no_spark() -> None:
    # A process of its own: this one's sys.modules holds whatever other tests imported.
    code = (
        "import contextlib, io, json, sys\n"
        "from neardup import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['tune']) == 0\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


# Each fails on its flags or config before a session is asked for, --input or not.
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--threshold", "1.5"], 2, "--threshold must be strictly between 0 and 1, not 1.5"),
        (["--threshold", "0"], 2, "--threshold must be strictly between 0 and 1, not 0.0"),
        (["--threshold", "nan"], 2, "--threshold must be strictly between 0 and 1, not nan"),
        (["--input", "data/sample/corpus.jsonl.gz", "--sample", "1"], 2, "--sample must be at least 2"),
        (["--sample", "100"], 2, "--sample and --sample-bytes need --input"),
        (["--input", "x", "--sample-bytes", "lots"], 2, "--sample-bytes must be a size such as 64m"),
        (["--input", "x", "--alpha", "1"], 2, "--alpha must be strictly between 0 and 1"),
        (["--num-perm", "0"], 2, "config key minhash.num_perm must be in 1..4096"),
        (["--bands", "64", "--rows", "4"], 2, "exceeds minhash.num_perm"),
        (["--set", "lsh.colour=red"], 2, "unknown config key lsh.colour"),
        (["--threshold", "high"], 2, "argument --threshold: invalid float value: 'high'"),
    ],
)
def test_errors_are_one_line_with_exit_code(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    ran = neardup(capsys, "tune", *args)
    assert ran.code == code, ran.err
    lines = [line for line in ran.err.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and message in lines[0], ran.err
    assert ran.out == "" and "Traceback" not in ran.err
