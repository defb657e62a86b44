"""Any legal path works: spaces, non-ASCII, `#`, `%` (a literal `%41`, which must not become
`A`) and `+` in the input, the output, a --config file, an index and decontaminate's
reference; and the paths' storage refusing writes (full, read-only) and Ctrl-C, as one line
and an exit code. Through the command line's entry in this process.

Spark names the files it read as URIs (`file:///a%20b%2541`), Hadoop's Path reads a name
literally: each case runs where the two spellings differ, and checks the result against
what the corpus was built to hold (planted exact duplicates among texts of random words,
which share no near-duplicates), not against another run of neardup.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adversarial import (
    assert_all_accounted,
    assert_one_line,
    assert_untouched,
    jsonl_records,
    parquet_records,
    snapshot,
)
from inprocess import neardup
from neardup.errors import StorageError
from neardup.runtime.fs import FileSystem

# Every character that URIs escape or that unquoting would change, in a folder's name and a
# file's: a space, non-ASCII, a fragment mark, a literal escape and a plus.
ODD = "a b é#%41+c"
# What marks a folder as a previous neardup output, which --overwrite may replace.
PREVIOUS_REPORT = '{"command": "dedup", "neardup_version": "0.1.0"}\n'
NO_HTML = ("--set", "report.html=false")
PAIRS = 12  # distinct texts, each at two ids: i and i + 100
MALFORMED = '{"id": 999, "text": "cut short\n'


def _texts(n: int, seed: int) -> list[str]:
    """`n` texts of 40 words drawn from 2,000 made-up ones: two of them share a handful of
    words at most, far below any near-duplicate threshold."""
    rng = random.Random(seed)
    vocab = [
        "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(4))
        for _ in range(2000)
    ]
    return [" ".join(rng.choice(vocab) for _ in range(40)) for _ in range(n)]


TEXTS = _texts(PAIRS + 6, seed=5)


def _pairs(k: range) -> list[dict[str, Any]]:
    return [{"id": i + off, "text": TEXTS[i]} for i in k for off in (0, 100)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("paths") / ODD
    folder.mkdir()
    return folder


def _jsonl(path: Path, rows: list[dict[str, Any]], malformed: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) + "\n" for r in rows]
    if malformed:
        lines.insert(3, MALFORMED)  # line 4
    path.write_text("".join(lines))
    return path


def _kept_texts(output: Path) -> list[str]:
    return sorted(pq.read_table(output / "kept").column("text").to_pylist())


def _config(root: Path) -> Path:
    """A --config file at an odd path: it turns malformed lines into rejected rows."""
    cfg = root / f"conf {ODD}.yaml"
    cfg.write_text("input:\n  malformed: reject\nreport:\n  html: false\n")
    return cfg


def test_dedup_of_a_jsonl_file_with_a_malformed_line(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _jsonl(root / "file" / f"in {ODD}.jsonl", _pairs(range(PAIRS)), malformed=True)
    out = root / f"out {ODD}"
    before = snapshot(src.parent)
    ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(out), "--config", str(_config(root)))
    assert ran.code == 0, ran.err[-3000:]
    counts = assert_all_accounted(out, jsonl_records(src))
    assert counts == {"kept": PAIRS, "exact_duplicate": PAIRS, "malformed": 1}
    assert _kept_texts(out) == sorted(TEXTS[:PAIRS])
    # The rejected row names the file as it is on disk, not as a URI, with its line number.
    (reason,) = pq.read_table(out / "rejected").column("reason").to_pylist()
    assert reason == f"malformed JSON line (file://{src} line 4)"
    assert not out.with_name(out.name + ".neardup-staging").exists()
    assert (out / "_SUCCESS").exists() and json.loads((out / "report.json").read_text())["input"] == str(src)
    assert_untouched(before, src.parent)


def test_a_malformed_line_in_a_folder_is_named_with_its_file_and_line(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = root / f"folder {ODD}"
    _jsonl(folder / f"part {ODD}.jsonl", _pairs(range(3)), malformed=True)
    _jsonl(folder / "part 2.jsonl", _pairs(range(3, 6)), malformed=False)
    out = root / f"failed {ODD}"
    before = snapshot(folder)
    ran = neardup(capsys, "dedup", "--input", str(folder), "--output", str(out), *NO_HTML)
    assert_one_line(ran.code, ran.err, 3, f"file://{folder}/part {ODD}.jsonl line 4: ")
    assert not out.exists()
    assert_untouched(before, folder)


def test_dedup_of_parquet_and_an_index_at_odd_paths(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """index build from a Parquet folder, index add from a Parquet file, dedup --against of
    a Parquet folder, each path odd."""
    built = root / f"built {ODD}"
    built.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"id": i, "text": TEXTS[i]} for i in range(6)]), built / f"p {ODD}.parquet"
    )
    added = root / f"added {ODD}.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": TEXTS[i]} for i in range(6, 9)]), added)
    batch = root / f"batch {ODD}"
    batch.mkdir()
    # Copies of an indexed text from each segment, and three texts the index does not hold.
    rows = [{"id": 200, "text": TEXTS[0]}, {"id": 207, "text": TEXTS[7]}]
    rows += [{"id": 200 + i, "text": TEXTS[i]} for i in range(12, 15)]
    pq.write_table(pa.Table.from_pylist(rows), batch / f"b {ODD}.parquet")
    index = root / f"index {ODD}"
    before = snapshot(built, added, batch)

    ran = neardup(capsys, "index", "build", "--input", str(built), "--index", str(index))
    assert ran.code == 0, ran.err[-3000:]
    ran = neardup(capsys, "index", "add", "--input", str(added), "--index", str(index))
    assert ran.code == 0, ran.err[-3000:]
    manifest = json.loads(sorted((index / "_manifest").glob("v*.json"))[-1].read_text())
    listed = sorted(f[0] for s in manifest["segments"] for f in s["texts"]["files"])
    assert listed == sorted([f"file://{added}", f"file://{built}/p {ODD}.parquet"])

    out = root / f"against {ODD}"
    ran = neardup(
        capsys, "dedup", "--input", str(batch), "--output", str(out), "--against", str(index), *NO_HTML
    )
    assert ran.code == 0, ran.err[-3000:]
    assert assert_all_accounted(out, parquet_records(batch)) == {"unique": 3, "near_duplicate": 2}
    clusters = {r["id"]: r for r in pq.read_table(out / "clusters").to_pylist()}
    assert {i for i, r in clusters.items() if r["status"] == "near_duplicate"} == {200, 207}
    assert {clusters[200]["matched_index_id"], clusters[207]["matched_index_id"]} == {0, 7}

    assert_untouched(before, built, added, batch)


def test_decontaminate_with_an_odd_reference(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _jsonl(root / f"corpus {ODD}.jsonl", [{"id": i, "text": TEXTS[i]} for i in range(PAIRS)], False)
    reference = root / f"evals {ODD}"
    _jsonl(reference / f"set {ODD}.jsonl", [{"id": f"q{i}", "text": TEXTS[i]} for i in (2, 5)], False)
    out = root / f"decon {ODD}"
    before = snapshot(corpus, reference)
    ran = neardup(
        capsys, "decontaminate", "--input", str(corpus), "--reference", str(reference), "--output", str(out)
    )
    assert ran.code == 0, ran.err[-3000:]
    assert sorted(pq.read_table(out / "removed").column("id").to_pylist()) == [2, 5]
    assert pq.read_table(out / "kept").num_rows == PAIRS - 2
    assert_untouched(before, corpus, reference)


# --- storage refusing a write, and Ctrl-C, in this process -------------------------------
# A real small file system (tmpfs, mounted here: root only), filled or remounted read-only
# at a stage's end by a logging handler (run in the driver's thread, so the next stage
# starts with the storage already changed); Ctrl-C is a real SIGINT sent to this process.


def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs of this test's own; skipped where mounting is not allowed (not root)."""
    where = tmp_path / f"mnt {ODD}"
    _mount_tmpfs(where, "size=2m")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(where: Path) -> None:
    """Write until the file system says it is full (ENOSPC), one file of this test's."""
    with contextlib.suppress(OSError), open(where / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())


def _remount_ro(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


class _AtStage(logging.Handler):
    """Runs `action` once, when stage `stage`'s log line is written."""

    def __init__(self, stage: str, action: Callable[[], None]) -> None:
        super().__init__()
        self.stage, self.action, self.done = stage, action, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.done and record.getMessage().startswith(f"stage {self.stage} "):
            self.done = True
            self.action()


@contextlib.contextmanager
def at_stage(stage: str, action: Callable[[], None]) -> Iterator[_AtStage]:
    handler = _AtStage(stage, action)
    logger = logging.getLogger("neardup")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
    assert handler.done, f"stage {stage} never ended"


def _corpus(root: Path) -> Path:
    return _jsonl(root / f"storage {ODD}.jsonl", _pairs(range(PAIRS)), malformed=False)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_storage_refusing_writes_mid_run_is_one_line_and_exit_5(
    spark: Any, root: Path, small_fs: Path, fault: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _corpus(root)
    out = small_fs / f"out {ODD}"
    before = snapshot(src)
    action = (lambda: _fill(small_fs)) if fault == "full" else (lambda: _remount_ro(small_fs))
    with at_stage("read", action):
        ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(out), *NO_HTML)
    reason = "no space left on device" if fault == "full" else "read-only file system"
    line = assert_one_line(ran.code, ran.err, 5, "cannot write ", f"{out}.neardup-staging", reason)
    assert "in stage " in line
    assert not out.exists()
    assert_untouched(before, src)


def test_a_read_only_output_is_refused_before_any_spark_job(
    spark: Any, root: Path, small_fs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _corpus(root)
    previous = small_fs / f"out {ODD}"
    previous.mkdir()
    (previous / "kept.parquet").write_bytes(b"a previous output")
    (previous / "report.json").write_text(PREVIOUS_REPORT)
    _remount_ro(small_fs)
    before = snapshot(src, small_fs)
    ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(previous), "--overwrite", *NO_HTML)
    # The lease beside the output is the first file the run writes.
    assert_one_line(ran.code, ran.err, 5, f"{previous}.neardup-lock", "read-only file system")
    assert "stage read" not in ran.err and "memory:" not in ran.err, "the read began"
    assert_untouched(before, src, small_fs)


def test_the_small_files_and_the_rename_name_the_path(spark: Any, small_fs: Path) -> None:
    """report.json and _SUCCESS go through FileSystem.write_bytes, publication through
    rename: on a full disk and a read-only one each is a StorageError naming its path."""
    fs = FileSystem.for_path(spark, str(small_fs))
    (small_fs / "staging").mkdir()
    _fill(small_fs)
    target = f"{small_fs}/staging/report.json"
    with pytest.raises(StorageError, match=re.escape(f"cannot write {target}: no space left on device")):
        fs.write_bytes(target, b"{}" * 50_000)
    ro = small_fs.parent / f"ro {ODD}"
    _mount_tmpfs(ro, "ro,size=1m")
    try:
        with pytest.raises(StorageError, match=re.escape(f"{ro}/out: read-only file system")):
            fs.check_writable(f"{ro}/out")
        with pytest.raises(StorageError, match=re.escape(f"cannot move {small_fs}/staging to {ro}/out")):
            fs.rename(f"{small_fs}/staging", f"{ro}/out")
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=True)
    assert (small_fs / "staging").is_dir()


def test_ctrl_c_in_a_stage_cancels_its_jobs_and_publishes_nothing(
    spark: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGINT to this process while the verify stage's Spark jobs run: exit 130, one line,
    the previous output untouched, no job of the run left running, and the session's Py4J
    connection in order after (pyspark's own handler would leave it reading stale answers)."""
    src = _corpus(root)
    out = root / f"interrupted {ODD}"  # a previous run's output, which --overwrite would replace
    (out / "kept").mkdir(parents=True)
    (out / "kept" / "part-0.parquet").write_bytes(b"the previous run's kept documents")
    (out / "report.json").write_text(PREVIOUS_REPORT)
    (out / "_SUCCESS").write_bytes(b"")
    before = snapshot(src, out)

    tracker = spark.sparkContext.statusTracker()
    running: list[int] = []

    def interrupt() -> None:
        """From another thread, as soon as one of the next stage's Spark jobs runs."""
        deadline = time.monotonic() + 60
        while not running and time.monotonic() < deadline:
            running.extend(tracker.getActiveJobsIds())
            time.sleep(0.002)
        os.kill(os.getpid(), signal.SIGINT)

    with at_stage("candidates", lambda: threading.Thread(target=interrupt, daemon=True).start()):
        ran = neardup(capsys, "dedup", "--input", str(src), "--output", str(out), "--overwrite", *NO_HTML)
    assert_one_line(ran.code, ran.err, 130, "interrupted by SIGINT in stage ", "nothing was published")
    assert_untouched(before, src, out)
    assert sorted(p.name for p in out.rglob("*")) == ["_SUCCESS", "kept", "part-0.parquet", "report.json"]
    deadline = time.monotonic() + 30
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tracker.getActiveJobsIds()
    # The job under way was cancelled, not left to finish (pyspark's own handler cannot
    # cancel it: its call into the JVM would go on the connection the job's call is using).
    assert "FAILED" in [tracker.getJobInfo(j).status for j in running], "the running job was not cancelled"
    assert spark.range(5).count() == 5 and spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
