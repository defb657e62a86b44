"""The lease (runtime/lease.py) on the local file system, without Spark: real files and
real processes. A live holder stops a second run (naming it); a dead one, a partial file
left long ago, a lease of another host not refreshed for the documented age are taken over
with one warning; a lease is released only by the run it names; of processes racing for
one lease exactly one holds it at a time; Ctrl-C releases it."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neardup.errors import LockedError
from neardup.runtime import lease as L

ROOT = Path(__file__).resolve().parents[2]
FILES = L.LocalFiles()


def _write(path: Path, **fields: object) -> dict[str, object]:
    now = time.time()
    d: dict[str, object] = {
        "neardup_lease": 1,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": now,
        "refreshed": now,
        "token": "someone-else",
        "boot": None,
        "pid_started": None,
    }
    d.update(fields)
    path.write_text(json.dumps(d))
    return d


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_lease_is_created_naming_this_process_and_released(tmp_path: Path) -> None:
    path = tmp_path / "out.neardup-lock"
    with L.held(FILES, str(path), "output out") as held:
        d = json.loads(path.read_text())
        assert (d["host"], d["pid"], d["token"]) == (socket.gethostname(), os.getpid(), held.holder.token)
        assert abs(d["started"] - time.time()) < 60
    assert not path.exists()


def test_a_live_holder_stops_a_second_run_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "out.neardup-lock"
    # The parent process (pytest's runner or shell) is alive for the whole test.
    before = _write(path, pid=os.getppid())
    with pytest.raises(LockedError) as e:
        L.Lease.acquire(FILES, str(path), "output out")
    msg = str(e.value)
    assert f"pid {os.getppid()} on host {socket.gethostname()}" in msg and "output out is in use" in msg
    assert str(path) in msg and e.value.exit_code == 6
    assert json.loads(path.read_text()) == before  # untouched


def test_an_old_lease_of_a_live_process_on_this_host_is_still_held(tmp_path: Path) -> None:
    """On this host liveness decides, not age: a run of days is still running."""
    path = tmp_path / "lock"
    _write(path, pid=os.getppid(), started=1.0, refreshed=1.0)
    with pytest.raises(LockedError):
        L.Lease.acquire(FILES, str(path), "output out")


def test_a_dead_holder_is_taken_over_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "lock"
    dead = _dead_pid()
    _write(path, pid=dead)
    with caplog.at_level(logging.WARNING, logger="neardup"):
        got = L.Lease.acquire(FILES, str(path), "output out")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"process {dead} is gone" in warnings[0] and "took over" in warnings[0]
    assert json.loads(path.read_text())["token"] == got.holder.token
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock"]  # nothing set aside left
    got.release()
    assert not path.exists()


def test_a_pid_now_of_another_process_is_a_dead_holder(tmp_path: Path) -> None:
    """The pid is alive but started at another time than the lease says: reused."""
    here = L.Here.now()
    holder = L.this_process(time.time())
    if holder.pid_started is None:
        pytest.skip("no /proc here")
    reused = L.Holder(**{**holder.__dict__, "pid_started": str(int(holder.pid_started) + 1)})
    assert "another process's" in (L.stale_reason(reused, None, time.time(), here) or "")
    assert L.stale_reason(holder, None, time.time(), here) is None


def test_another_hosts_lease_is_stale_only_after_the_documented_age(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    now = time.time()
    _write(path, host="elsewhere.example", pid=1, refreshed=now - L.STALE_SECONDS + 60)
    with pytest.raises(LockedError, match=r"on host elsewhere\.example"):
        L.Lease.acquire(FILES, str(path), "index idx")
    _write(path, host="elsewhere.example", pid=1, refreshed=now - L.STALE_SECONDS - 60)
    got = L.Lease.acquire(FILES, str(path), "index idx")
    got.release()
    assert not path.exists()


def test_another_boot_of_this_host_is_stale() -> None:
    here = L.Here(socket.gethostname(), "boot-now")
    old = L.Holder(socket.gethostname(), os.getpid(), 1.0, time.time(), "t", boot="boot-before")
    assert L.stale_reason(old, None, time.time(), here) == "its host has restarted since"


def test_an_unreadable_lease_is_held_until_old(tmp_path: Path) -> None:
    """A partial write (a refresh through Hadoop is not atomic) is judged by its age."""
    path = tmp_path / "lock"
    path.write_text('{"host": "h", "pi')
    with pytest.raises(LockedError, match="unreadable"):
        L.Lease.acquire(FILES, str(path), "output out")
    old = time.time() - L.STALE_SECONDS - 60
    os.utime(path, (old, old))
    L.Lease.acquire(FILES, str(path), "output out").release()
    assert not path.exists()


def test_a_lease_taken_over_is_not_deleted_by_its_old_holder(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    got = L.Lease.acquire(FILES, str(path), "output out")
    theirs = _write(path, pid=os.getppid(), token="the-new-holder")
    assert not got.refresh()
    got.release()
    assert json.loads(path.read_text()) == theirs


def test_refreshing_rewrites_the_time(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    with L.held(FILES, str(path), "output out", refresh_every=0.05) as got:
        first = json.loads(path.read_text())["refreshed"]
        deadline = time.time() + 10
        while json.loads(path.read_text())["refreshed"] == first and time.time() < deadline:
            time.sleep(0.05)
        d = json.loads(path.read_text())
        assert d["refreshed"] > first and d["token"] == got.holder.token
        assert d["started"] == got.holder.started
    assert not path.exists()


def test_the_lease_is_released_when_the_block_fails(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    with pytest.raises(KeyboardInterrupt), L.held(FILES, str(path), "output out"):
        raise KeyboardInterrupt
    assert not path.exists()


_HOLD = """
import os, sys, time
from neardup.errors import LockedError
from neardup.runtime.lease import LocalFiles, held
lock, go, stop = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.01)
try:
    with held(LocalFiles(), lock, "output out"):
        print("held", flush=True)
        while not os.path.exists(stop):
            time.sleep(0.01)
except LockedError as e:
    print("locked", e, flush=True)
    sys.exit(6)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    """A process that takes the lease once `<path>.go` exists and holds it until `<path>.stop` does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    args = [str(path), f"{path}.go", f"{path}.stop"]
    return subprocess.Popen([sys.executable, "-c", _HOLD, *args], stdout=subprocess.PIPE, text=True, env=env)


def test_of_processes_racing_for_a_lease_one_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    procs = [_holder(path) for _ in range(6)]
    Path(f"{path}.go").touch()
    deadline = time.time() + 60
    while sum(p.poll() is not None for p in procs) < 5 and time.time() < deadline:
        time.sleep(0.05)
    Path(f"{path}.stop").touch()
    outs = [p.communicate(timeout=60)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 6, 6, 6, 6, 6], outs
    winner = next(p.pid for p, o in zip(procs, outs, strict=True) if o.startswith("held"))
    assert all(f"pid {winner} on host" in o for o in outs if o.startswith("locked")), outs
    assert not path.exists()


def test_ctrl_c_releases_the_lease(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    p = _holder(path)
    Path(f"{path}.go").touch()
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    assert json.loads(path.read_text())["pid"] == p.pid
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 130
    assert not path.exists()


def test_a_lease_in_a_folder_that_cannot_be_written_is_a_storage_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(Exception) as e:
            L.Lease.acquire(FILES, str(folder / "lock"), "output out")
        assert getattr(e.value, "exit_code", None) == 5 and str(folder / "lock") in str(e.value)
    finally:
        folder.chmod(0o700)
