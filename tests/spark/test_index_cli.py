"""`neardup index build|add` and `dedup --against` through the command line's entry
(`neardup.cli.main`, in this process, on the test session): exit codes, one-line errors,
and appends that crash without changing what the index reads back. The crash between the
segment's files and the commit is the job's own hook raising (`NEARDUP_FAIL_HOW=raise`,
as in test_resume.py); the one real process is an `index add` whose whole process group
(driver, JVM, Python workers) is killed with SIGKILL mid-write, which no in-process crash
can stand in for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from inprocess import Ran, compiled_expressions, neardup
from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash
from neardup_testkit.synth import CorpusSpec, generate

ROOT = Path(__file__).resolve().parents[2]
# report.html is tested in tests/spark/test_report.py and tests/e2e; here it only costs time.
NO_HTML = ("--set", "report.html=false")

Snapshot = tuple[int, list[str], set[tuple[int, int, int]]]


@pytest.fixture(scope="module", autouse=True)
def _compiled(spark: Any) -> Iterator[None]:
    """No process in tests/e2e runs this command: here it runs compiled, as users run it."""
    with compiled_expressions(spark):
        yield


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three batches of one generated corpus (planted clusters straddle them), as Parquet."""
    table = generate(CorpusSpec(num_docs=900, seed=31, mean_chars=400, dup_fraction=0.5))
    root = tmp_path_factory.mktemp("batches")
    out = []
    for k in range(3):
        path = root / f"batch{k}"
        path.mkdir()
        pq.write_table(table.slice(k * 300, 300), path / "part-0.parquet")
        out.append(path)
    return out


def read_index(path: Path) -> Snapshot:
    """(version, segments, every (id, band, key)) as the layout in docs/design.md says a
    reader finds them: the highest manifest, and only the segments it lists (pyarrow)."""
    latest = sorted((path / "_manifest").glob("v*.json"))[-1]
    manifest = json.loads(latest.read_text())
    rows: set[tuple[int, int, int]] = set()
    for seg in manifest["segments"]:
        where = path / "segments" / seg["name"]
        ids = {r["_n"]: r["_id"] for r in pq.read_table(where / "docs").to_pylist()}
        keys = pq.read_table(where / "keys").to_pylist()
        rows |= {(ids[r["_n"]], int(r["band"]), r["_band_key"]) for r in keys}
    return manifest["version"], [s["name"] for s in manifest["segments"]], rows


def _ids(batch: Path) -> set[int]:
    return set(pq.read_table(batch, columns=["id"])["id"].to_pylist())


def _error_lines(ran: Ran) -> list[str]:
    return [line for line in ran.err.splitlines() if line.startswith("neardup: error:")]


def test_an_index_built_with_other_parameters_is_refused(
    spark: Any, batches: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index, out = tmp_path / "index", tmp_path / "out"
    banded = ["--set", "lsh.bands=20", "--set", "lsh.rows=6"]
    built = neardup(capsys, "index", "build", "--input", str(batches[0]), "--index", str(index), *banded)
    assert built.code == 0, built.err[-3000:]
    assert built.out.startswith("neardup: indexed 300 of 300 rows of ")
    assert read_index(index)[2] and len({r[0] for r in read_index(index)[2]}) == 300

    dedup = ["dedup", "--input", str(batches[1]), "--output", str(out), "--against", str(index), *NO_HTML]
    refused = neardup(capsys, *dedup)
    assert refused.code == 4, refused.err[-3000:]
    assert _error_lines(refused) == [
        f"neardup: error: index {index} was built with lsh.bands=20, this run has lsh.bands=18"
    ]
    assert "Traceback" not in refused.err and not out.exists()

    again = neardup(capsys, "index", "build", "--input", str(batches[1]), "--index", str(index), *banded)
    assert again.code == 2 and "already exists" in _error_lines(again)[0]

    ok = neardup(capsys, *dedup, *banded)
    assert ok.code == 0, ok.err[-3000:]
    report = json.loads((out / "report.json").read_text())
    matched = report["counts"]["matched_index"]
    assert matched > 0 and f"({matched:,} of them in favour of indexed documents)" in ok.out
    clusters = pq.read_table(out / "clusters").to_pylist()
    assert sum(r["matched_index_id"] is not None for r in clusters) == matched
    assert {r["id"] for r in clusters} == _ids(batches[1])


def _add(capsys: pytest.CaptureFixture[str], index: Path, batch: Path) -> Ran:
    return neardup(capsys, "index", "add", "--input", str(batch), "--index", str(index))


def _kill_mid_write(index: Path, batch: Path) -> int:
    """Start `index add` as a process of its own, SIGKILL its whole process group (driver,
    JVM, Python workers) as soon as the new segment's band-key files are being written;
    its exit status."""
    cmd = [sys.executable, "-m", "neardup", "index", "add", "--input", str(batch), "--index", str(index)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    earlier = set((index / "segments").iterdir())  # a crashed add's segment, say
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        while not any(p.parent not in earlier for p in (index / "segments").glob("v00000002-*/keys")):
            assert proc.poll() is None, f"index add ended ({proc.returncode}) before it wrote band keys"
            assert time.monotonic() < deadline, "index add never started writing band keys"
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_crashed_add_leaves_the_index_as_it_was_and_a_rerun_succeeds(
    spark: Any,
    batches: list[Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = tmp_path / "index"
    built = neardup(capsys, "index", "build", "--input", str(batches[0]), "--index", str(index))
    assert built.code == 0, built.err[-3000:]
    before = read_index(index)
    assert before[0] == 1 and {r[0] for r in before[2]} == _ids(batches[0]) and len(before[2]) == 300 * 18

    # Crash between the segment's files and the commit: the stage hook raises where a
    # driver of its own would exit (86), leaving the same files behind.
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, "write")
        crashing.setenv(FAULT_HOW_ENV, "raise")
        with pytest.raises(InjectedCrash) as crash:
            _add(capsys, index, batches[1])
    assert crash.value.args == ("write",)
    capsys.readouterr()  # the crashed add's log lines
    assert read_index(index) == before
    assert len(list((index / "segments").iterdir())) == 2  # the unlisted segment, never read

    # SIGKILL mid-write, the JVM and its workers with the driver: a real process.
    assert _kill_mid_write(index, batches[1]) == -signal.SIGKILL
    assert read_index(index) == before
    assert len(list((index / "segments").iterdir())) == 3

    # A rerun commits version 2 and deletes what the crashed ones left.
    rerun = _add(capsys, index, batches[1])
    assert rerun.code == 0, rerun.err[-3000:]
    version, segments, rows = read_index(index)
    assert version == 2 and segments[0] == before[1][0] and len(segments) == 2
    assert rows >= before[2] and {r[0] for r in rows} == _ids(batches[0]) | _ids(batches[1])
    assert len(rows) == 600 * 18
    assert sorted(p.name for p in (index / "segments").iterdir()) == sorted(segments)
    assert sorted(p.name for p in (index / "_manifest").glob("*.json")) == [
        "v00000001.json",
        "v00000002.json",
    ]

    # The batch again: its ids are indexed already (exit 3), and nothing changes.
    twice = _add(capsys, index, batches[1])
    assert twice.code == 3 and "id(s) are already in index" in _error_lines(twice)[0]
    assert read_index(index) == (version, segments, rows)
