"""What `--overwrite` may replace, paths resolved before every overlap check, and the lease
on an output and an index, through the command line's entry in this process
(`neardup.cli.main` on the test session; runtime/outputs.py, runtime/lease.py).

Every refused case asserts one `neardup: error:` line and its exit code, and that nothing
in the test's folder changed: not a file deleted, changed or added (no lease or staging
folder left behind). Every run that completes accounts for every input row (counted from
the JSON Lines the test wrote, independently of neardup) and leaves no lease."""

from __future__ import annotations

import json
import os
import random
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from adversarial import assert_all_accounted, assert_one_line, jsonl_records, snapshot
from inprocess import neardup
from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash

NO_HTML = ("--set", "report.html=false")
WORDS = [f"w{i}" for i in range(400)]


def _corpus(path: Path, rows: int, seed: int) -> Path:
    """`rows` documents of 30 words: the first third unique, the rest light edits of them."""
    rng = random.Random(seed)
    base = [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(rows // 3)]
    lines = []
    for i in range(rows):
        words = base[i % len(base)].split()
        if i >= len(base):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        lines.append(json.dumps({"id": i + seed * 1000, "text": " ".join(words)}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _foreign(folder: Path) -> Path:
    """A folder of someone's unrelated files (with a _SUCCESS, as any Spark job's output has)."""
    (folder / "photos").mkdir(parents=True)
    (folder / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "_SUCCESS").write_text("")
    return folder


def _refused(tmp: Path, code: int, args: list[str], capsys: Any, *fragments: str) -> str:
    """Run `args`: refused with `code` and one line holding `fragments`, the folder unchanged."""
    before = snapshot(tmp)
    ran = neardup(capsys, *args)
    line = assert_one_line(ran.code, ran.err, code, *fragments)
    after = snapshot(tmp)
    assert after == before, (
        f"gone {sorted(set(before) - set(after))}, new {sorted(set(after) - set(before))}, "
        f"changed {sorted(k for k in before if k in after and before[k] != after[k])}"
    )
    return line


def _dedup(inp: Path | str, out: Path | str, *more: str) -> list[str]:
    return ["dedup", "--input", str(inp), "--output", str(out), *NO_HTML, *more]


def _no_lease(out: Path) -> None:
    left = [p.name for p in out.parent.iterdir() if ".neardup-lock" in p.name]
    assert not left, left


def _lease(path: Path, pid: int, host: str | None = None, refreshed: float | None = None) -> None:
    now = time.time()
    path.write_text(
        json.dumps(
            {
                "neardup_lease": 1,
                "host": host or socket.gethostname(),
                "pid": pid,
                "started": now - 60,
                "refreshed": refreshed or now,
                "token": "the-other-run",
            }
        )
    )


def _dead_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# --- what --overwrite replaces -------------------------------------------------------------


def test_overwrite_refuses_a_folder_of_unrelated_files(spark: Any, tmp_path: Path, capsys: Any) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    out = _foreign(tmp_path / "data")
    _refused(tmp_path, 2, _dedup(inp, out, "--overwrite"), capsys, f"output {out}", "not a neardup output")
    # Without --overwrite too: it is not ours, whatever the flag.
    _refused(tmp_path, 2, _dedup(inp, out), capsys, "not a neardup output")


def test_overwrite_refuses_a_file(spark: Any, tmp_path: Path, capsys: Any) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    out = tmp_path / "results.csv"
    out.write_text("a,b\n1,2\n")
    _refused(tmp_path, 2, _dedup(inp, out, "--overwrite"), capsys, f"output {out} is a file")


def test_a_foreign_staging_folder_is_refused(spark: Any, tmp_path: Path, capsys: Any) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    staging = _foreign(tmp_path / "out.neardup-staging")
    (staging / "_work").mkdir()  # even with a _work/: no marker, not ours
    _refused(tmp_path, 2, _dedup(inp, tmp_path / "out", "--overwrite"), capsys, str(staging), "not a staging")


def test_overwrite_replaces_a_neardup_output(spark: Any, tmp_path: Path, capsys: Any) -> None:
    """A previous output (as a run publishes it: report.json naming its command and
    neardup's version) is replaced whole; what is around it stays."""
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 45, 2)
    out = tmp_path / "out"
    (out / "kept").mkdir(parents=True)
    (out / "kept" / "part-00000.parquet").write_bytes(b"an older run's rows")
    (out / "report.json").write_text(json.dumps({"command": "decontaminate", "neardup_version": "0.0.9"}))
    (out / "_SUCCESS").write_text("")
    bystander = _foreign(tmp_path / "keep")
    around = snapshot(inp.parent, bystander)

    ran = neardup(capsys, *_dedup(inp, out, "--overwrite"))
    assert ran.code == 0, ran.err
    assert_all_accounted(out, jsonl_records(inp))  # the new output, all of it
    report = json.loads((out / "report.json").read_text())
    assert report["command"] == "dedup" and report["input"] == str(inp)
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["_SUCCESS", "clusters", "kept", "rejected", "report.json"]
    assert not (out / "kept" / "part-00000.parquet").exists()
    assert not (tmp_path / "out.neardup-staging").exists()
    _no_lease(out)
    assert snapshot(inp.parent, bystander) == around


# --- paths resolved ---------------------------------------------------------------------------


def test_an_input_reached_through_a_symlink_inside_the_output(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    real = tmp_path / "real"
    _corpus(real / "in.jsonl", 30, 1)
    (tmp_path / "link").symlink_to(real)
    args = _dedup(tmp_path / "link" / "in.jsonl", real, "--overwrite")
    _refused(tmp_path, 2, args, capsys, "is inside output", f"resolved: {real}/in.jsonl")


def test_an_output_reached_through_a_symlink_inside_the_input(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    real = tmp_path / "real"
    _corpus(real / "in.jsonl", 30, 1)
    (tmp_path / "link").symlink_to(real)
    args = _dedup(real, tmp_path / "link" / "out", "--overwrite")
    _refused(tmp_path, 2, args, capsys, "is inside input", f"resolved: {real}/out")


def test_a_relative_output_with_dotdot_holding_a_file_url_input(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    """The output as a relative path with `..` (relative to the JVM's working directory, as
    Hadoop reads it), the input as a file:// URL inside it."""
    held = tmp_path / "held"
    inp = _corpus(held / "in.jsonl", 30, 1)
    cwd = str(spark._jvm.java.lang.System.getProperty("user.dir"))
    out = os.path.join(os.path.relpath(tmp_path / "elsewhere", cwd), "..", "held")
    assert ".." in out and not os.path.isabs(out)
    _refused(tmp_path, 2, _dedup(f"file://{inp}", out, "--overwrite"), capsys, "is inside output")


# --- the other commands -----------------------------------------------------------------------


def test_index_build_refuses_a_folder_of_unrelated_files(spark: Any, tmp_path: Path, capsys: Any) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    idx = _foreign(tmp_path / "idx")
    args = ["index", "build", "--input", str(inp), "--index", str(idx), "--overwrite"]
    _refused(tmp_path, 2, args, capsys, f"index {idx}", "not a neardup index")
    _refused(tmp_path, 2, args[:-1], capsys, "not a neardup index")


def test_decontaminate_refuses_a_folder_of_unrelated_files_and_a_reference_inside(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    ref = _corpus(tmp_path / "ref" / "evals.jsonl", 6, 3)
    out = _foreign(tmp_path / "data")
    args = [
        "decontaminate",
        "--input",
        str(inp),
        "--reference",
        str(ref),
        "--output",
        str(out),
        "--overwrite",
    ]
    _refused(tmp_path, 2, args, capsys, "not a neardup output")
    # The reference reached through a symlink into the output.
    (tmp_path / "link").symlink_to(out)
    _corpus(out / "evals.jsonl", 6, 3)
    args[4] = str(tmp_path / "link" / "evals.jsonl")
    _refused(tmp_path, 2, args, capsys, "reference", "is inside output")


def test_an_output_inside_the_index_it_runs_against(spark: Any, tmp_path: Path, capsys: Any) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    idx = tmp_path / "idx"
    (idx / "_manifest").mkdir(parents=True)
    _refused(tmp_path, 2, _dedup(inp, idx / "out", "--against", str(idx)), capsys, "is inside index")
    (tmp_path / "out").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "out")
    _refused(
        tmp_path,
        2,
        _dedup(inp, tmp_path / "out", "--against", str(tmp_path / "link" / "idx")),
        capsys,
        "index",
    )


# --- the lease --------------------------------------------------------------------------------


def test_a_live_lease_stops_a_second_run_before_it_touches_anything(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    out = tmp_path / "out"
    # What a first run would have: a previous output and its staging folder at work.
    (out / "kept").mkdir(parents=True)
    (out / "report.json").write_text(json.dumps({"command": "dedup", "neardup_version": "0.1.0"}))
    (tmp_path / "out.neardup-staging" / "_work" / "sign-0123").mkdir(parents=True)
    (tmp_path / "out.neardup-staging" / "_neardup-staging").write_text("")
    holder = os.getppid()  # alive for the whole test
    _lease(tmp_path / "out.neardup-lock", holder)
    _refused(
        tmp_path,
        6,
        _dedup(inp, out, "--overwrite"),
        capsys,
        f"pid {holder} on host {socket.gethostname()}",
        "out.neardup-lock",
    )
    # Through a symlink to the output's folder: the same lease.
    (tmp_path / "link").symlink_to(tmp_path)
    _refused(tmp_path, 6, _dedup(inp, tmp_path / "link" / "out", "--overwrite"), capsys, f"pid {holder}")
    # An index's lease is inside it.
    idx = tmp_path / "idx"
    idx.mkdir()
    _lease(idx / "_neardup-lock", holder)
    args = ["index", "build", "--input", str(inp), "--index", str(idx)]
    _refused(tmp_path, 6, args, capsys, f"index {idx} is in use", f"pid {holder}")


def test_a_stale_lease_is_taken_over_and_a_run_into_an_empty_folder_completes(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    inp = _corpus(tmp_path / "in" / "docs.jsonl", 30, 1)
    out = tmp_path / "out"
    out.mkdir()  # an empty folder: --overwrite may replace it
    dead = _dead_pid()
    _lease(tmp_path / "out.neardup-lock", dead)
    ran = neardup(capsys, *_dedup(inp, out, "--overwrite"))
    assert ran.code == 0, ran.err
    warned = [line for line in ran.err.splitlines() if "took over the lease" in line]
    assert len(warned) == 1 and f"process {dead} is gone" in warned[0], ran.err
    assert_all_accounted(out, jsonl_records(inp))
    _no_lease(out)


def test_the_lease_is_released_after_a_failure(
    spark: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "in" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"id": 1, "text": "a b c"}\n{"id": null, "text": "d e f"}\n')
    out = tmp_path / "out"
    ran = neardup(capsys, *_dedup(bad, out))
    assert_one_line(ran.code, ran.err, 3, "null id")
    _no_lease(out)
    assert not out.exists()
    # A crash (the job's own hook raising) mid-run: the lease goes too, the staging folder
    # stays (marked as ours) for the rerun to resume from.
    inp = _corpus(tmp_path / "in2" / "docs.jsonl", 30, 1)
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, "sign")
        crashing.setenv(FAULT_HOW_ENV, "raise")
        with pytest.raises(InjectedCrash):
            neardup(capsys, *_dedup(inp, out))
    _no_lease(out)
    assert (tmp_path / "out.neardup-staging" / "_neardup-staging").exists()


# --- the lease through Hadoop's FileSystem API (what HDFS and object stores take) -------------


def test_a_lease_through_hadoop(spark: Any, tmp_path: Path) -> None:
    """The same lease rules through Hadoop's API (here its local file system, whose
    `create(path, overwrite=false)` refuses an existing file as HDFS does)."""
    from neardup.errors import LockedError
    from neardup.runtime.fs import FileSystem
    from neardup.runtime.lease import HadoopFiles, Lease

    path = f"file:{tmp_path}/out.neardup-lock"
    files = HadoopFiles(FileSystem.for_path(spark, path))
    got = Lease.acquire(files, path, "output out")
    assert json.loads((tmp_path / "out.neardup-lock").read_text())["token"] == got.holder.token
    with pytest.raises(LockedError, match=f"pid {os.getpid()} on host"):
        Lease.acquire(files, path, "output out")
    assert got.refresh()
    got.release()
    assert not (tmp_path / "out.neardup-lock").exists()
    _lease(tmp_path / "out.neardup-lock", _dead_pid())
    again = Lease.acquire(files, path, "output out")  # stale: taken over
    again.release()
    assert not [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_hadoop_resolves_the_existing_part_and_keeps_the_rest(spark: Any, tmp_path: Path) -> None:
    from neardup.runtime.fs import FileSystem

    (tmp_path / "a").mkdir()
    fs = FileSystem.for_path(spark, f"file:{tmp_path}")
    assert fs.resolved(f"file:{tmp_path}/a/new/deeper") == f"file:{tmp_path}/a/new/deeper"
    assert fs.resolved(f"file:{tmp_path}/a") == f"file:{tmp_path}/a"
