"""The command line as a user runs it: a real process, real files, exit codes, stderr.
Errors found before any JVM starts (usage, configuration) go through the same entry
(`neardup.cli.main`) in this process: no process boundary is crossed before them."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import ARCHIVE_NOTE, ROOT, SAMPLE, neardup

from brute_force import Result
from inprocess import neardup as in_process
from neardup_testkit.reference import guarded_clusters


def _rows(out: Path) -> list[dict[str, object]]:
    return pq.read_table(out / "clusters").to_pylist()


@pytest.mark.compat
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
    assert n == 2254
    # data/sample/README.md, "Ground truth" at t = 0.8: 316 clusters (the largest 192), 998
    # documents removed before the guard; after it 330 clusters (the largest 167), 983 removed
    # (1,271 kept), of which 574 are copies (equal normalized text) of a document before them.
    want = {"input": 2254, "kept": 1271, "clusters": 330, "largest_cluster": 167}
    want |= {"exact_duplicates": 574, "near_duplicates": 983 - 574, "rejected": 0}
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
    assert clusters.schema.names == ["id", "cluster_id", "kept", "status", "similarity", "reason"]
    # Every document's kept document and similarity to it, against the brute-force
    # reference (exact Jaccard over all similar pairs, the guard in plain Python).
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    ref = guarded_clusters([d["id"] for d in docs], [d["text"] for d in docs], 0.8, 0.7)
    got = {r["id"]: (r["cluster_id"], r["similarity"]) for r in clusters.to_pylist()}
    assert {i: (k, None if s is None else round(s, 9)) for i, (k, s) in got.items()} == {
        i: (k, None if s is None else round(s, 9)) for i, (k, s) in ref.items()
    }
    assert report["guard"] == {
        "enabled": True,
        "threshold": 0.7,
        "rounds": 4,
        "failing_per_round": [82, 18, 1, 0],
        "scored_pairs": report["guard"]["scored_pairs"],
        "clusters_split": 8,
        "documents_rehomed": 82,
        "released": 0,
        "moved_to_nearest": 55,
        "largest_cluster_before": 192,
        "largest_cluster_after": 167,
        "seconds": report["guard"]["seconds"],
    }
    # The MIT, BSD and Apache licences (hundreds of copies with other holders) fill LSH buckets
    # of more than lsh.all_pairs_up_to documents: stars, which the stars stage resolves.
    assert report["stars"] == {
        "star_edges": 552,
        "rounds": 4,
        "pairs": 9807,
        "verified_pairs": 12,
        "still_split": 1,
    }
    # One line per stage on stderr, no Python traceback.
    assert "stage sign" in proc.stderr and "Traceback" not in proc.stderr

    again = neardup("dedup", "--input", str(SAMPLE), "--output", str(out), "--set", "lsh.threshold=0.7")
    assert again.returncode == 2
    errors = [line for line in again.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1 and "already exists" in errors[0] and "--overwrite" in errors[0]


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("neardup: error:")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "lsh.threshold=1.5"], "lsh.threshold must be strictly between 0 and 1"),
        (["--set", "lsh.bands=64", "--set", "lsh.rows=4"], "exceeds minhash.num_perm"),
        (["--set", "lsh.colour=red"], "unknown config key lsh.colour"),
        (["--config", "/nonexistent/x.yaml"], "config file /nonexistent/x.yaml does not exist"),
    ],
)
def test_config_errors_are_one_line_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Found before any JVM starts: in this process."""
    ran = in_process(capsys, "dedup", "--input", str(SAMPLE), "--output", str(tmp_path / "o"), *args)
    assert ran.code == 2, ran.err[-2000:]
    lines = _error_lines(ran.err)
    assert len(lines) == 1 and message in lines[0], ran.err[-2000:]
    assert "Traceback" not in ran.err and not (tmp_path / "o").exists()


def test_an_input_error_is_one_line_with_exit_code_3(
    chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    """Found once Spark reads the input: a process, so that whatever the JVM prints to the
    terminal would be in its stderr."""
    inp, _ = chains_corpus
    proc = neardup("dedup", "--input", str(inp), "--output", str(tmp_path / "o"), "--id-col", "nope")
    assert proc.returncode == 3, proc.stderr[-2000:]
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and "no id column 'nope'" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found before any JVM starts: in this process. (An input that does not exist is found
    by Spark's file system: tests/spark/test_bad_input.py's, on the shared session.)"""
    ran = in_process(capsys, "dedup", "--output", str(tmp_path / "o"))
    assert ran.code == 2 and "neardup: error: the following arguments are required: --input" in ran.err


# Spark's start-up chatter: the JVM's, log4j's and Hadoop's lines a bare Spark prints.
CHATTER = (
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel).",
    "NativeCodeLoader: Unable to load native-hadoop library",
)


def _chatter(text: str) -> list[str]:
    return [c for c in CHATTER if c in text]


def test_stderr_holds_neardup_lines_only(sample_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The README's first command: on stderr the first line, where Spark's log is, the
    memory plan, one line per stage (and one per round of the stars stage) and nothing else;
    the summary on stdout. The log is deleted when the run ends well."""
    from neardup import __version__

    out, proc = sample_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = r"\d\d:\d\d:\d\d neardup "
    n = r"[\d,]+"
    want = [
        rf"{t}neardup {re.escape(__version__)} on local\[\*\], JVM heap .+: input {re.escape(str(SAMPLE))}, "
        r"threshold 0\.80, 18 bands x 5 rows of 128 oph permutations, verify exact",
        rf"{t}Spark's own log: (/\S+/neardup-[\w.-]+/spark-[\w-]+\.log) \(kept if the run fails; "
        r"--debug shows it here\)",
        rf"{t}memory: driver heap .+",
        *(
            rf"{t}stage {name:<10} +\d+\.\d s  {counts}"
            for name, counts in [
                ("read", "input=2,254"),
                ("sign", "rejected=0, signed=2,254"),
                ("exact", "exact_duplicates=574"),
                ("candidates", f"candidate_pairs={n}, star_edges=552"),
                ("verify", f"verified_pairs={n}"),
                ("components", "components_backend=driver, components_iterations=0"),
            ]
        ),
        *(
            rf"{t}stars: round {i}, {k} further centres \(on the driver\)"
            for i, k in enumerate([43, 15, 40, 44], 1)
        ),
        *(
            rf"{t}stage {name:<10} +\d+\.\d s  {counts}"
            for name, counts in [
                ("stars", "star_rounds=4, star_pairs=9,807, stars_split=1, star_verified_pairs=12"),
                ("survivors", "clustered=552"),
                (
                    "guard",
                    "clusters=330, largest_cluster=167, guard_rounds=4, clusters_split=8, "
                    "documents_rehomed=82",
                ),
                ("write", ""),
                ("check", "kept=1,271, unique=941, exact_duplicates=574, near_duplicates=409, rejected=0"),
                ("report", ""),
            ]
        ),
        rf"{t}report\.html: \d+ KB rendered in \d+\.\d s",
    ]
    lines = proc.stderr.splitlines()
    # On a machine where no local run has yet built the class archive, this run leaves the
    # process that builds it and says so (tests/e2e/test_class_archive.py).
    lines = [line for line in lines if not re.fullmatch(rf"{t}{ARCHIVE_NOTE}", line)]
    assert len(lines) == len(want), proc.stderr
    for line, pattern in zip(lines, want, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert _chatter(proc.stderr) == []
    log = re.fullmatch(want[1], lines[1])
    assert log is not None and not Path(log.group(1)).exists()
    summary = proc.stdout.splitlines()
    assert len(summary) == 2 and summary[0].startswith("neardup: 2,254 documents in ")
    assert summary[1] == (
        f"Outputs in file:{out}: kept/ (the deduplicated corpus), clusters/ (every input id with its "
        "cluster and status), rejected/, report.json and report.html (open it in a browser)."
    )


def test_debug_shows_spark_s_own_output(chains_corpus: tuple[Path, Result], tmp_path: Path) -> None:
    """With --debug the JVM writes to the terminal: its start-up lines are there (the run
    stops after reading, which is enough to see them)."""
    import pyspark

    proc = neardup(
        "dedup",
        "--input",
        str(chains_corpus[0]),
        "--output",
        str(tmp_path / "out"),
        "--debug",
        env={"NEARDUP_FAIL_AFTER_STAGE": "read"},
    )
    assert proc.returncode == 86, proc.stderr[-3000:]
    # Spark 4 adds the incubator module (SPARK-48021); Spark 3.5 does not.
    want = list(CHATTER[1:] if int(pyspark.__version__.split(".")[0]) < 4 else CHATTER)
    assert _chatter(proc.stderr) == want
    assert "Spark's own log" not in proc.stderr


def test_spark_submit_keeps_spark_s_start_up_off_stderr(
    chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    """./spark-submit.sh (local[1]): the driver logs warnings only and the JVM's incubator
    line is dropped, so none of the chatter and no INFO line reaches stderr (the run stops
    after reading; the start-up is over by then). PythonRunner sends the driver's Python
    stderr, neardup's lines, to stdout."""
    conf_dir = tmp_path / "spark-conf"  # no log4j2.properties of a user's
    conf_dir.mkdir()
    env = {"PYTHON": sys.executable, "SPARK_CONF_DIR": str(conf_dir), "NEARDUP_FAIL_AFTER_STAGE": "read"}
    args = ["dedup", "--input", str(chains_corpus[0]), "--output", str(tmp_path / "out")]
    proc = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--master", "local[1]", "--", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env},
        cwd=ROOT,
    )
    assert proc.returncode == 86, (proc.stdout + proc.stderr)[-3000:]
    assert re.search(rf"stage read +\d+\.\d s  input={len(chains_corpus[1])}\n", proc.stdout), proc.stdout
    assert _chatter(proc.stderr) == [], proc.stderr
    assert [line for line in proc.stderr.splitlines() if " INFO " in line] == [], proc.stderr
