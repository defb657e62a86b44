"""The command line as a user runs it: a real process, real files, exit codes, stderr."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import SAMPLE, neardup


def _rows(out: Path) -> list[dict[str, object]]:
    return pq.read_table(out / "clusters").to_pylist()


def test_sample_corpus_end_to_end(sample_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = sample_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Outputs in" in proc.stdout and "kept/" in proc.stdout
    for name in ("kept", "clusters", "rejected", "report.json", "report.html", "_SUCCESS"):
        assert (out / name).exists(), name
    report = json.loads((out / "report.json").read_text())
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        n = sum(1 for _ in f)
    counts = report["counts"]
    assert n == 3000
    # data/sample/README.md, "Ground truth" at t = 0.8: 181 clusters (the largest 5), 262
    # documents removed, 2,738 kept; the 119 exact and format copies are exact duplicates.
    want = {"input": 3000, "kept": 2738, "clusters": 181, "largest_cluster": 5}
    want |= {"exact_duplicates": 119, "near_duplicates": 262 - 119, "rejected": 0}
    assert {k: counts[k] for k in want} == want
    assert set(report["seconds"]) >= {
        "read",
        "exact",
        "sign",
        "candidates",
        "verify",
        "components",
        "survivors",
    }
    assert len(report["bands"]["s_curve"]) == 21
    clusters = pq.read_table(out / "clusters")
    assert clusters.num_rows == n
    assert clusters.schema.names == ["id", "cluster_id", "kept", "status", "reason"]
    # One line per stage on stderr, no Python traceback.
    assert "stage sign" in proc.stderr and "Traceback" not in proc.stderr

    again = neardup("dedup", "--input", str(SAMPLE), "--output", str(out), "--set", "lsh.threshold=0.7")
    assert again.returncode == 2
    errors = [line for line in again.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1 and "already exists" in errors[0] and "--overwrite" in errors[0]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--set", "lsh.threshold=1.5"], 2, "lsh.threshold must be strictly between 0 and 1"),
        (["--set", "lsh.bands=64", "--set", "lsh.rows=4"], 2, "exceeds minhash.num_perm"),
        (["--set", "lsh.colour=red"], 2, "unknown config key lsh.colour"),
        (["--config", "/nonexistent/x.yaml"], 2, "config file /nonexistent/x.yaml does not exist"),
        (["--id-col", "nope"], 3, "no id column 'nope'"),
    ],
)
def test_errors_are_one_line_with_exit_code(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    proc = neardup("dedup", "--input", str(SAMPLE), "--output", str(tmp_path / "o"), *args)
    assert proc.returncode == code, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_missing_input_and_usage(tmp_path: Path) -> None:
    proc = neardup("dedup", "--input", str(tmp_path / "none"), "--output", str(tmp_path / "o"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = neardup("dedup", "--output", str(tmp_path / "o"))
    assert (
        proc.returncode == 2
        and "neardup: error: the following arguments are required: --input" in proc.stderr
    )


@pytest.mark.parametrize(
    ("crash_after", "finished"),
    [
        ("sign", ["signatures"]),
        ("candidates", ["candidates", "signatures"]),
        ("verify", ["candidates", "edges", "signatures"]),
    ],
)
def test_rerun_after_a_crash_resumes_from_finished_stages(
    sample_run: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path: Path,
    crash_after: str,
    finished: list[str],
) -> None:
    out = tmp_path / "out"
    args = ["dedup", "--input", str(SAMPLE), "--output", str(out)]
    env_fail = {"NEARDUP_FAIL_AFTER_STAGE": crash_after}
    crashed = neardup(*args, env=env_fail)
    assert crashed.returncode == 86, crashed.stderr[-2000:]
    assert not out.exists(), "a crashed run must not leave output that looks complete"
    staging = tmp_path / "out.neardup-staging" / "_work"
    assert sorted(p.name.split("-")[0] for p in staging.iterdir() if (p / "_SUCCESS").exists()) == finished

    if crash_after == "sign":
        # Other signing parameters: the finished signatures are not reused (nor mixed in).
        other = neardup(*args, "--set", "minhash.seed=7", env=env_fail)
        assert other.returncode == 86 and "reusing" not in other.stderr
        crashed = neardup(*args, env=env_fail)
        assert crashed.returncode == 86
    resumed = neardup(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for stage in finished:
        assert f"stage {stage:<10} reusing" in resumed.stderr
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["resumed_stages"]) == finished
    assert _rows(out) == _rows(sample_run[0])
    assert not (tmp_path / "out.neardup-staging").exists() and not (out / "_work").exists()


def test_both_components_backends_give_the_same_clusters(
    sample_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The whole job with GraphFrames, which neardup adds to its session by itself."""
    from graphframes_env import GRAPHFRAMES, NO_GRAPHFRAMES

    if GRAPHFRAMES is None:
        print(NO_GRAPHFRAMES)
        pytest.skip(NO_GRAPHFRAMES)
    out = tmp_path / "gf"
    proc = neardup(
        "dedup", "--input", str(SAMPLE), "--output", str(out), "--set", "components.backend=graphframes"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["components"]["backend"] == "graphframes"
    assert _rows(out) == _rows(sample_run[0])
