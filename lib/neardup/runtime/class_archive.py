"""A class data sharing archive (the JDK's CDS) for the JVM a local run launches.

Spark's JVM loads and verifies some 19,000 classes at every start, and a short run pays for
it: about 3 of the sample's 15 seconds (docs/performance.md). The JDK can map those classes
from an archive instead. neardup builds one per Java, Spark and class path, once, in the
background, from the classes a run of its own loaded:

1. A local run whose JVM neardup launches, finding no archive for its key, starts that JVM
   with -XX:DumpLoadedClassList (the list of the classes it loads; no measurable cost) and
   starts a detached process (`python -m neardup.runtime.class_archive`) that waits for the
   JVM to exit, then runs `java -Xshare:dump` at the lowest CPU priority (about 30 s of CPU
   and 200 MB of disk) into a temporary file, renamed into place when it is whole.
2. Later runs with the same key start their JVM with -XX:SharedArchiveFile. The JVM checks
   the archive itself (its Java, the class path, the jars' sizes and times, the heap's
   pointer sizes) and ignores one that does not match, its warning silenced: a stale archive
   costs the gain, never the run.

Where: ``NEARDUP_CLASS_ARCHIVE_DIR``, else ``<XDG_CACHE_HOME or ~/.cache>/neardup/jvm/``,
``<key>.jsa``. The key digests the java executable, Spark's jars (names, sizes, times),
whatever else joins the class path, and the heap. The three most recently used archives are
kept. A dump that fails leaves ``<key>.failed`` (the JDK's reason) and is not retried until
that file is deleted: a Spark distribution whose ``conf/`` directory is not empty is one such
case, since the JDK archives no class path with a non-empty directory before a jar.

The JVM maps the archive as code, so the folder is made with mode 0700 and used only if
nobody else can write to it (neardup.private_dir; NEARDUP_CLASS_ARCHIVE_DIR, the folder
itself, is checked too, a symlink followed); a failed check means no archive and one warning
naming the folder. The builder reads its spec (which names the java it runs) only from such
a folder, and cleaning up deletes only files named as neardup names them.

Off: ``NEARDUP_CLASS_ARCHIVE=0``; a user's own -Xshare or archive options (in
spark.driver.extraJavaOptions or defaultJavaOptions, or JAVA_TOOL_OPTIONS); a folder whose
path has a space (Spark's launcher splits the options at spaces); other systems than POSIX;
anything that fails while planning. spark-submit's JVM, an active session's and a cluster's
executors are never touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neardup.private_dir import NotPrivate, file_problem, folder_problem, private_dir, warn_once
from neardup.runtime.java import java_class

log = logging.getLogger("neardup")

ENV = "NEARDUP_CLASS_ARCHIVE"
DIR_ENV = "NEARDUP_CLASS_ARCHIVE_DIR"
EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
# Options of the user's that mean they manage class sharing themselves.
_USERS_OWN = (
    "-Xshare",
    "SharedArchiveFile",
    "SharedClassListFile",
    "DumpLoadedClassList",
    "ArchiveClassesAtExit",
)
# A mismatched archive is reported by the JVM as a warning on its output: silenced.
QUIET = ("-Xlog:cds*=off",)
KEEP = 3  # archives kept in the folder, the most recently used: other venvs, Javas, heaps
LOCK_STALE_S = 3600  # a builder's lock older than this was left by a builder that died
LIST_STALE_S = 86400  # a class list older than this was left by a run whose builder died


@dataclass(frozen=True)
class Plan:
    """The JVM options for this launch; `record`: where its class list goes, if it records one."""

    options: tuple[str, ...]
    archive: Path
    record: Path | None = None


def _base() -> tuple[Path, tuple[str, ...]]:
    """(anchor, the folders neardup names under it; see neardup.private_dir): DIR_ENV, the
    folder itself, if set; else the user's cache directory and neardup/jvm."""
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given), ()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"), ("neardup", "jvm")


def folder() -> Path:
    """DIR_ENV if set, else `<XDG_CACHE_HOME or ~/.cache>/neardup/jvm`."""
    anchor, levels = _base()
    return anchor.joinpath(*levels)


def _private_folder() -> Path | None:
    """`folder()`, made where missing (mode 0700), if only this user can write to it (the
    JVM maps the archive as code: neardup.private_dir); None otherwise, with one warning
    where a check failed."""
    try:
        return private_dir(*_base())
    except NotPrivate as e:
        warn_once(e, "the JVM's class archive")
    except OSError:  # cannot be made: no archive, as where none was ever built
        pass
    return None


def _java() -> Path | None:
    """The java executable spark-submit runs: JAVA_HOME's, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).is_file() else None


def _stamp(path: Path) -> list[Any]:
    st = path.stat()
    return [path.name, st.st_size, st.st_mtime_ns]


def key(settings: Mapping[str, str]) -> str | None:
    """The digest of what the launched JVM's classes and archive depend on; None where the
    java executable or Spark's jars cannot be found (no archive then)."""
    java = _java()
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
        listing = sorted(_stamp(p) for p in jars.iterdir())
    except (Exception, SystemExit):  # no Spark home to read (pyspark exits then): no key
        return None
    if java is None:
        return None
    blob = {
        "java": [str(java), *_stamp(java)[1:]],
        "jars": [str(jars), listing],
        # spark-class puts these on the class path as well.
        "env": {
            k: os.environ.get(k)
            for k in ("SPARK_CONF_DIR", "SPARK_DIST_CLASSPATH", "HADOOP_CONF_DIR", "YARN_CONF_DIR")
        },
        "class_path": settings.get("spark.driver.extraClassPath"),
        # The heap decides whether object pointers are compressed, which an archive fixes.
        "heap": settings.get("spark.driver.memory"),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def plan(settings: Mapping[str, str]) -> Plan | None:
    """What a local JVM about to be launched with `settings` adds to its options: the
    archive where one exists, else a class list to build it from (None: neither, and
    whatever goes wrong here: the run goes on without an archive)."""
    try:
        return _plan(settings)
    except Exception as e:
        log.debug("class archive: none (%s)", e)
        return None


def _plan(settings: Mapping[str, str]) -> Plan | None:
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    # POSIX only: the builder waits with kill(pid, 0) and lowers its priority with nice.
    if os.name != "posix":
        return None
    given = " ".join(
        [
            settings.get(EXTRA_JAVA_OPTIONS, ""),
            settings.get(DEFAULT_JAVA_OPTIONS, ""),
            os.environ.get("JAVA_TOOL_OPTIONS", ""),
        ]
    )
    if any(word in given for word in _USERS_OWN):
        return None
    k = key(settings)
    # Spark's launcher splits the options at spaces: a path with one would break the JVM's start.
    if k is None or any(c.isspace() for c in str(folder())):
        return None
    where = _private_folder()
    if where is None:
        return None
    archive = where / f"{k}.jsa"
    if archive.is_file():
        with contextlib.suppress(OSError):  # the newest used survive pruning (_prune)
            os.utime(archive)
        return Plan((f"-XX:SharedArchiveFile={archive}", *QUIET), archive)
    if (where / f"{k}.failed").exists() or _locked(where / f"{k}.lock"):
        return None
    if not os.access(where, os.W_OK | os.X_OK):  # the JVM could not write its list there
        return None
    _drop_stale(where)
    record = where / f"{k}.{os.getpid()}.classlist"
    return Plan((f"-XX:DumpLoadedClassList={record}",), archive, record)


def _locked(lock: Path) -> bool:
    try:
        return time.time() - lock.stat().st_mtime < LOCK_STALE_S
    except OSError:
        return False


# The names of the files neardup writes in the folder (<key>.jsa, <key>.<pid>.classlist,
# <key>.<pid>.spec, <key>.<pid>.tmp): cleaning up deletes nothing else, as a folder the user
# names (DIR_ENV) may hold files of theirs.
_ARCHIVE = re.compile(r"[0-9a-f]{16}\.jsa")
_LEFT_BY_BUILDER = re.compile(r"[0-9a-f]{16}\.[0-9]+\.(classlist|spec|tmp)")


def _ours(p: Path, pattern: re.Pattern[str]) -> bool:
    """A regular file (not a symlink) named as neardup names its files."""
    with contextlib.suppress(OSError):
        return pattern.fullmatch(p.name) is not None and stat.S_ISREG(p.lstat().st_mode)
    return False


def _drop_stale(where: Path) -> None:
    """Class lists, specs and half-written archives left by builders that died."""
    for p in where.iterdir():
        with contextlib.suppress(OSError):
            if _ours(p, _LEFT_BY_BUILDER) and time.time() - p.lstat().st_mtime > LIST_STALE_S:
                p.unlink()


def build_after_exit(plan: Plan, spark: Any, pid: int) -> bool:
    """Start the detached builder for the class list `plan` records: it waits for the JVM
    (process `pid`) to exit, then dumps the archive from that JVM's own class path, java
    and heap and collector options (read from it now). True if it started."""
    if plan.record is None:
        return False
    try:
        jvm = spark.sparkContext._jvm
        system = java_class(jvm, "java.lang.System")
        management = java_class(jvm, "java.lang.management.ManagementFactory")
        inputs = list(management.getRuntimeMXBean().getInputArguments())
        spec = {
            "pid": pid,
            "java": str(Path(system.getProperty("java.home")) / "bin" / "java"),
            "class_path": system.getProperty("java.class.path"),
            # What an archive must share with the JVMs that map it: the collector and the
            # heap (pointer sizes).
            "options": [a for a in inputs if a.startswith(("-Xmx", "-XX:+Use", "-XX:-Use"))],
            "list": str(plan.record),
            "archive": str(plan.archive),
        }
        # In a file: a long class path could pass the limit of one command-line argument.
        spec_file = plan.record.with_suffix(".spec")
        spec_file.write_text(json.dumps(spec))
        subprocess.Popen(
            [sys.executable, "-m", "neardup.runtime.class_archive", str(spec_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process, and a Ctrl-C of its terminal
            close_fds=True,
        )
    except Exception as e:  # the run goes on without an archive
        log.debug("class archive: not built (%s)", e)
        return False
    return True


def build(spec: Mapping[str, Any]) -> bool:
    """The builder's work (see the module's docstring); True if it wrote the archive."""
    _wait_for_exit(int(spec["pid"]))
    with contextlib.suppress(OSError):
        os.nice(19)
    archive, listed = Path(spec["archive"]), Path(spec["list"])
    lock = archive.with_suffix(".lock")
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        if _locked(lock):  # another builder is at it
            with contextlib.suppress(OSError):
                listed.unlink()
            return False
        lock.unlink(missing_ok=True)
        return build(spec)
    os.close(fd)
    tmp = archive.with_name(f"{archive.stem}.{os.getpid()}.tmp")
    try:
        if archive.exists() or not listed.is_file():
            return False
        _complete_lines(listed)
        cmd = [
            spec["java"],
            "-Xshare:dump",
            *spec["options"],
            f"-XX:SharedClassListFile={listed}",
            f"-XX:SharedArchiveFile={tmp}",
            *QUIET,
            "-cp",
            spec["class_path"],
        ]
        try:
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800)
            failed = done.stderr[-4000:] if done.returncode != 0 or not tmp.is_file() else None
        except subprocess.TimeoutExpired:
            failed = b"java -Xshare:dump took more than 1800 s\n"
        if failed is not None:
            # Not retried (delete the marker to retry): the same Java and class path would
            # most likely fail the same way.
            archive.with_suffix(".failed").write_bytes(failed)
            return False
        os.replace(tmp, archive)
        _prune(archive)
        return True
    finally:
        for p in (tmp, listed, lock):
            with contextlib.suppress(OSError):
                p.unlink()


def _wait_for_exit(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # the pid is someone else's now: ours has exited
            return
        time.sleep(1.0)


def _complete_lines(path: Path) -> None:
    """Drop a last line the JVM did not finish writing (killed mid-write)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def _prune(keep: Path) -> None:
    """Delete all but the KEEP most recently used archives of the folder (`keep` among them:
    `plan` touches an archive it hands out)."""
    found = (p for p in keep.parent.iterdir() if p != keep and _ours(p, _ARCHIVE))
    others = sorted(found, key=lambda p: p.lstat().st_mtime)
    for p in others[: max(0, len(others) - (KEEP - 1))]:
        with contextlib.suppress(OSError):
            p.unlink()


def build_from(spec_path: Path) -> bool:
    """The detached builder's start: the spec (it names the java executable run) is read
    only from a file and folder nobody else can write to (the folder passed the checks when
    the run wrote it there; checked again here), and names files in that folder only."""
    where = spec_path.parent
    try:
        bad, problem = where, folder_problem(where, follow=True)
        if problem is None:
            bad, problem = spec_path, file_problem(spec_path)
    except OSError:
        return False
    if problem is not None:
        warn_once(NotPrivate(bad, problem), "the JVM's class archive")
        return False
    loaded = json.loads(spec_path.read_text())
    spec_path.unlink(missing_ok=True)
    if {Path(loaded["archive"]).parent, Path(loaded["list"]).parent} != {where}:
        return False
    return build(loaded)


if __name__ == "__main__":
    build_from(Path(sys.argv[1]))
