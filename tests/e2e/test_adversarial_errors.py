"""The command line as a process stopped by a signal, and failing in a way it does not know.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group (the driver, its
JVM, the Python workers): here the command runs in a process group of its own and the
group gets the signal, as soon as the driver's stderr shows the stage named. A scheduler
stopping a job sends SIGTERM to the driver. Either way: one line, exit 130, nothing
published (the previous output as it was), and the process gone with its JVM.

A Spark failure neardup does not know (here the driver's result size limit, a real job
failure) is one line naming Spark's log, exit 1, and the log holds the Python traceback.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_process import ROOT, SAMPLE, neardup

from adversarial import assert_one_line, assert_untouched, snapshot

NO_HTML = ("--set", "report.html=false")


def _previous_output(root: Path) -> Path:
    """An output a run before this one published (its files are what --overwrite replaces)."""
    out = root / "out"
    (out / "kept").mkdir(parents=True)
    (out / "kept" / "part-0.parquet").write_bytes(b"the previous run's kept documents")
    # What marks it as neardup's, which --overwrite may replace.
    (out / "report.json").write_text('{"command": "dedup", "neardup_version": "0.1.0", "previous": true}\n')
    (out / "_SUCCESS").write_bytes(b"")
    return out


def _stopped(args: list[str], after: str, how: signal.Signals, group: bool) -> tuple[int, str, float, int]:
    """Run the command line, send `how` once its stderr has a line matching `after` (to its
    process group, or to the driver alone); its exit code, stderr, seconds to exit and
    process group."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if re.search(after, line):
                break
        else:
            pytest.fail(f"the run ended before {after!r}:\n{''.join(seen)[-3000:]}")
        sent = time.monotonic()
        if group:
            os.killpg(proc.pid, how)
        else:
            os.kill(proc.pid, how)
        rest = proc.stderr.read()
        code = proc.wait(timeout=120)
        return code, "".join(seen) + rest, time.monotonic() - sent, proc.pid
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _gone(pid: int) -> bool:
    """No process of the command's group is left (the JVM and Python workers included)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize(
    ("after", "how", "group", "stages"),
    [
        # Ctrl-C in a terminal while the input is read (the memory plan is logged mid-read).
        (r"neardup memory: ", signal.SIGINT, True, {"read", "sign"}),
        # SIGTERM to the driver while documents are signed.
        (r"neardup stage read ", signal.SIGTERM, False, {"sign", "exact"}),
    ],
    ids=["ctrl-c-reading", "sigterm-signing"],
)
def test_a_signal_ends_the_run_with_130_and_publishes_nothing(
    tmp_path: Path, after: str, how: signal.Signals, group: bool, stages: set[str]
) -> None:
    out = _previous_output(tmp_path)
    before = snapshot(out, SAMPLE)
    args = ["dedup", "--input", str(SAMPLE), "--output", str(out), "--overwrite", *NO_HTML]
    code, err, seconds, pgid = _stopped(args, after, how, group)
    line = assert_one_line(code, err, 130, f"interrupted by {how.name}", "nothing was published")
    # A signal that lands between two stages (the previous one logged, the next not begun)
    # names none.
    stage = re.search(r"in stage (\w+)", line)
    assert stage is None or stage.group(1) in stages, line
    assert seconds < 30, f"{seconds:.1f} s from the signal to the exit"
    assert _gone(pgid), "the JVM or a Python worker outlived the command"
    assert_untouched(before, out, SAMPLE)
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "kept", "report.json"]


def test_an_unknown_spark_failure_is_one_line_and_the_traceback_is_in_the_log(tmp_path: Path) -> None:
    """A job that fails for Spark's own limit on the results a task returns to the driver:
    no rule of neardup's knows it."""
    out = tmp_path / "out"
    ran = neardup(
        "dedup",
        "--input",
        str(SAMPLE),
        "--output",
        str(out),
        "--conf",
        "spark.driver.maxResultSize=1k",
        *NO_HTML,
    )
    line = assert_one_line(
        ran.returncode, ran.stderr, 1, "stage read failed: org.apache.spark.SparkException: ", "maxResultSize"
    )
    log = re.search(r"\(Spark's log, with the traceback: (\S+\.log)\)$", line)
    assert log is not None, line
    text = Path(log.group(1)).read_text(errors="replace")
    assert "neardup: the failure's Python traceback:" in text
    assert "Traceback (most recent call last):" in text and "py4j.protocol.Py4JJavaError" in text
    assert not out.exists()
