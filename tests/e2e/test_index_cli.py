"""`neardup index build|add` and `dedup --against` as a user runs them: real processes,
exit codes, one-line errors, and appends that crash (a stage hook, and SIGKILL of the whole
process group mid-write) without changing what the index reads back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_process import ROOT, neardup

from neardup_testkit.synth import CorpusSpec, generate

Snapshot = tuple[int, list[str], set[tuple[int, int, int]]]


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


def _error_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("neardup: error:")]


def test_an_index_built_with_other_parameters_is_refused(batches: list[Path], tmp_path: Path) -> None:
    index, out = tmp_path / "index", tmp_path / "out"
    banded = ["--set", "lsh.bands=20", "--set", "lsh.rows=6"]
    built = neardup("index", "build", "--input", str(batches[0]), "--index", str(index), *banded)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.startswith("neardup: indexed 300 of 300 rows of ")
    assert read_index(index)[2] and len({r[0] for r in read_index(index)[2]}) == 300

    refused = neardup("dedup", "--input", str(batches[1]), "--output", str(out), "--against", str(index))
    assert refused.returncode == 4, refused.stderr[-3000:]
    assert _error_lines(refused) == [
        f"neardup: error: index {index} was built with lsh.bands=20, this run has lsh.bands=18"
    ]
    assert "Traceback" not in refused.stderr and not out.exists()

    again = neardup("index", "build", "--input", str(batches[1]), "--index", str(index), *banded)
    assert again.returncode == 2 and "already exists" in _error_lines(again)[0]

    ok = neardup("dedup", "--input", str(batches[1]), "--output", str(out), "--against", str(index), *banded)
    assert ok.returncode == 0, ok.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    matched = report["counts"]["matched_index"]
    assert matched > 0 and f"({matched:,} of them in favour of indexed documents)" in ok.stdout
    clusters = pq.read_table(out / "clusters").to_pylist()
    assert sum(r["matched_index_id"] is not None for r in clusters) == matched
    assert {r["id"] for r in clusters} == _ids(batches[1])


def _add(index: Path, batch: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return neardup("index", "add", "--input", str(batch), "--index", str(index), env=env)


def _kill_mid_write(index: Path, batch: Path) -> int:
    """Start `index add`, SIGKILL its whole process group (driver, JVM, Python workers) as
    soon as the new segment's band-key files are being written; its exit status."""
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
    batches: list[Path], tmp_path: Path
) -> None:
    index = tmp_path / "index"
    built = neardup("index", "build", "--input", str(batches[0]), "--index", str(index))
    assert built.returncode == 0, built.stderr[-3000:]
    before = read_index(index)
    assert before[0] == 1 and {r[0] for r in before[2]} == _ids(batches[0]) and len(before[2]) == 300 * 18

    # Crash between the segment's files and the commit (the driver exits, as if killed).
    crashed = _add(index, batches[1], NEARDUP_FAIL_AFTER_STAGE="write")
    assert crashed.returncode == 86, crashed.stderr[-3000:]
    assert read_index(index) == before
    assert len(list((index / "segments").iterdir())) == 2  # the unlisted segment, never read

    # SIGKILL mid-write, the JVM and its workers with the driver.
    assert _kill_mid_write(index, batches[1]) == -signal.SIGKILL
    assert read_index(index) == before
    assert len(list((index / "segments").iterdir())) == 3

    # A rerun commits version 2 and deletes what the crashed ones left.
    rerun = _add(index, batches[1])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
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
    twice = _add(index, batches[1])
    assert twice.returncode == 3 and "id(s) are already in index" in _error_lines(twice)[0]
    assert read_index(index) == (version, segments, rows)
