"""A lease: one run at a time on an output or an index.

A run that writes an output or an index first creates its lease file, atomically and only
if there is none: on a local file system written whole under a name of its own and linked
into place (`os.link`, which like `O_CREAT | O_EXCL` fails where the name exists; O_EXCL
itself where links are not supported), elsewhere with Hadoop's
`FileSystem.create(path, overwrite=false)` (atomic on HDFS; on object stores such as S3 a
check then a put, so two runs starting in the same instant could both succeed:
docs/operations.md says so). The file is JSON naming the holder: host, boot, pid
(and the process's start on Linux), when it started and when it last refreshed the lease.

A second run finds the file and stops at once (LockedError, exit 6, naming the holder),
before it deletes or writes anything. A lease is stale, and taken over with one warning,
when its holder is on this host (same boot) and its process is gone (or the pid now
belongs to a later process), or, on another host, when it has not been refreshed for
STALE_SECONDS. While the run goes on, a daemon thread rewrites the lease every
REFRESH_SECONDS, so a long run on another host is never taken for a dead one. The lease is
released when the run ends, by success, failure or Ctrl-C, and only if it still names this
run (its token): a lease taken over meanwhile is someone else's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from neardup.errors import LockedError, StorageError

log = logging.getLogger("neardup")

# A lease on another host not refreshed for this long is stale. Refreshed every
# REFRESH_SECONDS: fifteen refreshes missed in a row before another run takes over.
REFRESH_SECONDS = 120.0
STALE_SECONDS = 1800.0
# Two runs taking over one stale lease at once: the loser sees the winner's and stops.
_ATTEMPTS = 4
_UNSURE = 10  # looks at a lease file being written


@dataclass(frozen=True)
class Holder:
    """Who holds a lease (the lease file's content)."""

    host: str
    pid: int
    started: float  # seconds since the epoch
    refreshed: float
    token: str  # this run's own: a lease naming another token is not ours to delete
    boot: str | None = None  # the host's boot id (Linux): a pid of an earlier boot is gone
    pid_started: str | None = None  # the process's start, in clock ticks after boot (Linux)

    def to_bytes(self) -> bytes:
        return (json.dumps({"neardup_lease": 1, **asdict(self)}, sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        """The holder a lease file names, or None where it is not one (a partial write)."""
        try:
            d = json.loads(data.decode("utf-8"))
            return cls(
                host=str(d["host"]),
                pid=int(d["pid"]),
                started=float(d["started"]),
                refreshed=float(d["refreshed"]),
                token=str(d["token"]),
                boot=None if d.get("boot") is None else str(d["boot"]),
                pid_started=None if d.get("pid_started") is None else str(d["pid_started"]),
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def describe(self) -> str:
        return f"a neardup run, pid {self.pid} on host {self.host}, started {_utc(self.started)}"


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


# --- this process, and the processes of this host ---------------------------------------------


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks after boot (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2, in parentheses) may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def this_process(now: float) -> Holder:
    pid = os.getpid()
    return Holder(
        host=socket.gethostname(),
        pid=pid,
        started=now,
        refreshed=now,
        token=uuid.uuid4().hex,
        boot=_boot_id(),
        pid_started=process_start(pid),
    )


@dataclass(frozen=True)
class Here:
    """What staleness is judged against: this host, and how its processes are seen."""

    host: str
    boot: str | None
    alive: Callable[[int], bool] = process_alive
    start_of: Callable[[int], str | None] = process_start

    @classmethod
    def now(cls) -> Here:
        return cls(socket.gethostname(), _boot_id())


def stale_reason(holder: Holder | None, modified: float | None, now: float, here: Here) -> str | None:
    """Why a lease is stale, or None while its holder may be running. `modified`: the lease
    file's modification time, judged where its content is not a lease (a partial write)."""
    if holder is None:
        if modified is not None and now - modified > STALE_SECONDS:
            return f"it is unreadable and {int(now - modified)} s old"
        return None
    if holder.host == here.host:
        if holder.boot is not None and here.boot is not None and holder.boot != here.boot:
            return "its host has restarted since"
        if not here.alive(holder.pid):
            return f"its process {holder.pid} is gone"
        started = here.start_of(holder.pid)
        if holder.pid_started is not None and started is not None and started != holder.pid_started:
            return f"its process {holder.pid} is gone (the pid is another process's now)"
        return None  # a live process of this host: however old, it is running
    if now - holder.refreshed > STALE_SECONDS:
        ago = int(now - holder.refreshed)
        return f"it was last refreshed {ago} s ago (stale after {int(STALE_SECONDS)} s)"
    return None


# --- the lease file, on a local file system or through Hadoop ---------------------------------


class LeaseFiles(Protocol):
    """The file operations a lease needs, on one file system."""

    def create(self, path: str, data: bytes) -> bool:
        """Create `path` holding `data` if there is no such file, atomically; False if there is."""

    def read(self, path: str) -> bytes | None:
        """The file's content, None where there is none."""

    def modified(self, path: str) -> float | None:
        """Its modification time in seconds since the epoch, None where there is none."""

    def overwrite(self, path: str, data: bytes) -> None: ...

    def move(self, src: str, dst: str) -> bool:
        """Rename `src` to a new name `dst`; False if `src` is gone."""

    def remove(self, path: str) -> None: ...


class LocalFiles:
    """Lease files on the local file system, through the OS."""

    def create(self, path: str, data: bytes) -> bool:
        # Written whole under a name of our own, then linked to `path`: a link, like
        # O_CREAT | O_EXCL, fails where the name exists, and a reader never sees the file
        # half written. Where links are not supported, O_EXCL.
        tmp = f"{path}.new-{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            except OSError:
                return self._create_exclusive(path, data)
            finally:
                os.remove(tmp)
        except OSError as e:  # a read-only or missing folder
            why = (e.strerror or str(e)).lower()
            raise StorageError(f"cannot create the lease file {path}: {why}") from e

    @staticmethod
    def _create_exclusive(path: str, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            return b""

    def modified(self, path: str) -> float | None:
        try:
            return os.stat(path).st_mtime
        except FileNotFoundError:
            return None

    def overwrite(self, path: str, data: bytes) -> None:
        # A reader sees the old content or the new, never a partial file.
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def move(self, src: str, dst: str) -> bool:
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            return False
        return True

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


class HadoopFiles:
    """Lease files through Hadoop's FileSystem API (neardup.runtime.fs.FileSystem)."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs

    def create(self, path: str, data: bytes) -> bool:
        return bool(self._fs.create_new(path, data))

    def read(self, path: str) -> bytes | None:
        if not self._fs.exists(path):
            return None
        try:
            return str(self._fs.read_text(path)).encode("utf-8")
        except Exception:  # deleted since, or unreadable: judged by its age
            return None if not self._fs.exists(path) else b""

    def modified(self, path: str) -> float | None:
        if not self._fs.exists(path):
            return None
        return float(self._fs.stat(path)[2]) / 1000.0

    def overwrite(self, path: str, data: bytes) -> None:
        self._fs.write_bytes(path, data)

    def move(self, src: str, dst: str) -> bool:
        return bool(self._fs.moved(src, dst))

    def remove(self, path: str) -> None:
        self._fs.delete(path)


# --- taking, keeping and releasing it ---------------------------------------------------------


class Lease:
    """A lease this run holds on `what` (an output or an index), in the file `path`."""

    def __init__(self, files: LeaseFiles, path: str, what: str, holder: Holder) -> None:
        self.files = files
        self.path = path
        self.what = what
        self.holder = holder
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def acquire(cls, files: LeaseFiles, path: str, what: str, here: Here | None = None) -> Lease:
        """Take the lease, or raise LockedError naming its live holder. A stale lease is
        taken over with one warning."""
        here = here or Here.now()
        took_over: str | None = None
        unsure = 0
        for _ in range(_ATTEMPTS + _UNSURE):
            mine = this_process(time.time())
            if files.create(path, mine.to_bytes()):
                if took_over is not None:
                    log.warning("%s: took over the lease %s, stale because %s", what, path, took_over)
                return cls(files, path, what, mine)
            found = files.read(path)
            if found is None:
                continue  # released meanwhile
            holder = Holder.parse(found)
            modified = files.modified(path)
            if holder is None and unsure < _UNSURE and modified is not None and time.time() - modified < 5:
                # Being written (a create through Hadoop is not atomic on object stores): look again.
                unsure += 1
                time.sleep(0.1)
                continue
            reason = stale_reason(holder, modified, time.time(), here)
            if reason is None:
                raise LockedError(_locked(what, holder, path))
            # Set the stale file aside under a name of our own (a rename: of two runs doing
            # this, one moves it), then make sure what was moved is what was judged stale.
            aside = f"{path}.stale-{uuid.uuid4().hex}"
            if not files.move(path, aside):
                continue
            moved = files.read(aside)
            if moved != found:  # a new holder's lease, written in between: put it back
                if moved is not None:
                    files.create(path, moved)
                files.remove(aside)
                continue
            files.remove(aside)
            took_over = f"{holder.describe() if holder else 'its holder'}: {reason}"
        found = files.read(path)
        raise LockedError(_locked(what, Holder.parse(found) if found else None, path))

    def refresh(self) -> bool:
        """Rewrite the lease with the time now, if it is still ours; False if it is not."""
        found = self.files.read(self.path)
        current = Holder.parse(found) if found is not None else None
        if current is None or current.token != self.holder.token:
            return False
        self.holder = replace(self.holder, refreshed=time.time())
        self.files.overwrite(self.path, self.holder.to_bytes())
        return True

    def keep_fresh(self, every: float = REFRESH_SECONDS) -> None:
        """Refresh the lease every `every` seconds in a daemon thread until released."""

        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    if not self.refresh():
                        log.warning("%s: the lease %s no longer names this run", self.what, self.path)
                        return
                except Exception:  # a file system hiccup: the next refresh may pass
                    continue

        self._thread = threading.Thread(target=loop, name="neardup-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop refreshing; delete the lease file if it still names this run."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        found = self.files.read(self.path)
        current = Holder.parse(found) if found is not None else None
        if current is not None and current.token == self.holder.token:
            self.files.remove(self.path)


def _locked(what: str, holder: Holder | None, path: str) -> str:
    who = holder.describe() if holder is not None else "another run (its lease file is unreadable)"
    return (
        f"{what} is in use by {who} (lease {path}); wait for it to end, or, if that run is gone, "
        "delete the lease file"
    )


@contextlib.contextmanager
def held(files: LeaseFiles, path: str, what: str, refresh_every: float = REFRESH_SECONDS) -> Iterator[Lease]:
    """The lease on `what` held for the block, refreshed meanwhile, released at its end
    (also on an exception or Ctrl-C)."""
    lease = Lease.acquire(files, path, what)
    try:
        lease.keep_fresh(refresh_every)
        yield lease
    finally:
        try:
            lease.release()
        except Exception as e:  # after a JVM death: the run's own error is the one to report
            log.warning("%s: could not release the lease %s (%s)", what, path, type(e).__name__)
