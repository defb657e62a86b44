"""The one place a SparkSession is made (or reused, under Databricks and tests).

A JVM this module launches (local mode, or a client-mode driver started by
`neardup` itself) gets a heap sized for the machine unless the user chose one, and,
unless `--debug`, writes its own output (Spark's log, the Python workers' stderr, the
JVM's fatal-error lines) to a log file instead of the terminal. The process handle is
kept, so when the JVM dies the command line can say how (`runtime/failures.py`).

The log files live in a directory of the user's own, `<tmp>/neardup-<user>/` (mode 0700,
used only if nobody else can write to it: neardup.private_dir): the command line deletes a
run's log when the run ends well and names it when it fails; logs older than LOG_DAYS (of
runs that failed, or were killed before they could clean up) are deleted when a later run
starts, by their names (`spark-<date>-<time>-<8 characters>.log`), nothing else.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from neardup.errors import NeardupError
from neardup.private_dir import NotPrivate, private_dir, warn_once
from neardup.runtime import class_archive, pydaemon
from neardup.runtime.class_archive import EXTRA_JAVA_OPTIONS
from neardup.runtime.java import java_class
from neardup.runtime.memory import format_size, human, local_heap, machine_memory, parse_size
from neardup.runtime.packages import class_loads, packages_to_add

log = logging.getLogger("neardup")

# Settings neardup relies on; a user's --conf still wins.
_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Rows per Arrow batch until the run sizes batches from its input (memory.py).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2048",
    "spark.ui.showConsoleProgress": "false",
    # Spark sizes its memory pages from the heap (up to 64 MiB), and a broadcast hash
    # relation holds at least one page however few rows it has: 35 MiB per broadcast join
    # at a 1 GiB heap, 68 MiB at 4 GiB, for as long as a cached frame's plan refers to it.
    # With 2 MiB pages a broadcast of a few thousand ids costs ~4 MiB; larger records
    # still get a page of their own size.
    "spark.buffer.pageSize": "2m",
}
# A local session has one executor: locality can only be waited for, and local mode offers its
# task slots again only when a task ends. A stage whose tasks that had a local slot (cached
# partitions) ended within the wait, and whose others prefer hosts the executor is not on
# (blocks on HDFS), then waited for ever: dedup --against with the index on HDFS, at the
# guard's checkpoint (tests/e2e/test_yarn.py). Set when the session starts; a user's --conf wins.
LOCAL_MODE_SETTINGS = {"spark.locality.wait": "0"}
DRIVER_MEMORY = "spark.driver.memory"
DAEMON_MODULE = "spark.python.daemon.module"
# Inputs up to this size (bytes as stored) run in a JVM tuned for a short run.
SMALL_INPUT_BYTES = 64 << 20
# For such inputs in local mode: adaptive execution plans each shuffle's stages as jobs
# of their own and re-optimizes between them, a fixed cost per query that a few MB of
# data never repay (nothing to coalesce or split).
SMALL_INPUT_SETTINGS = {"spark.sql.adaptive.enabled": "false"}
LOG_DAYS = 7
_launched_log: Path | None = None  # see launched_log()
_launched_here = False  # see launched_here()
_archive: class_archive.Plan | None = None  # see archive_report()


@dataclass
class Started:
    """A session and what the first log line says about it."""

    spark: SparkSession
    reused: bool
    heap_note: str  # e.g. "JVM heap 12g (half of this machine's 24 GB)"
    jvm_log: Path | None = None  # where a JVM launched here writes its own output
    not_applied: list[str] = field(default_factory=list)  # --conf keys a live session refused
    archive_building: Path | None = None  # the class archive a builder left behind will write


def get_spark(
    master: str | None, conf: Mapping[str, str], app_name: str = "neardup", quiet_jvm: bool = False
) -> SparkSession:
    """Reuse the active session if there is one, else build one (see `start`)."""
    return start(master, conf, app_name, quiet_jvm).spark


def start(
    master: str | None,
    conf: Mapping[str, str],
    app_name: str = "neardup",
    quiet_jvm: bool = False,
    packages: Mapping[str, str] | None = None,
    preload: Sequence[str] = (),
    small_input: bool = False,
) -> Started:
    """Reuse the active session if there is one (Databricks, notebooks, tests), else build one.

    With no master and no `spark.master` anywhere, local mode with every core. In local
    mode without a user's `spark.driver.memory` the heap is half of the machine's memory.
    `quiet_jvm` sends the output of a JVM launched here to a log file (named in errors).
    `packages` (Maven coordinate -> a class of it) join `spark.jars.packages`, except where
    that class is already there: a jar on `spark.jars` or `--jars` holds it (an air-gapped
    cluster's copy; fetching would fail there), or the active session's JVM loads it. An
    active session cannot take the others (they are reported in `not_applied`); under
    spark-submit none is added, since its JVM started with what --packages and --jars gave
    it and a package named later is never fetched. `preload`: modules the caller will need
    next, imported while a JVM launched here starts (`preloaded`). `small_input`: the caller
    knows the input is small (`small_local_input`): a local JVM then compiles with C1 only,
    adaptive execution is off and a shuffle has one partition per core (`local_settings`).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        refused = []
        for k, v in conf.items():
            try:
                active.conf.set(k, v)
            except Exception:  # static settings cannot change on a live session
                refused.append(k)
        loaded = active.sparkContext.getConf().get("spark.jars.packages", "") or ""
        asked = (packages or {}).items()
        refused += [p for p, cls in asked if p not in loaded.split(",") and not class_loads(active, cls)]
        return Started(active, True, "the active session's JVM", not_applied=refused)
    settings = dict(_DEFAULTS)
    if not master and "spark.master" not in conf and "MASTER" not in os.environ and not _submitted():
        master = "local[*]"
    heap_note = ""
    local = bool(master and master.startswith("local"))
    java_options = local_java_options(small_input) if local else []
    if local:
        settings.update(local_settings(small_input, local_cores(master or "local[*]")))
        settings.update(LOCAL_MODE_SETTINGS)
    if local and not _submitted():
        heap_note = _size_local_heap(conf, settings)
    elif _submitted():
        heap_note = "JVM heap as spark-submit set it"
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
        settings["spark.master"] = master
    launching = not _submitted() and SparkContext._gateway is None
    # A local JVM launched here maps Spark's classes from an archive once one is built.
    archive = class_archive.plan({**settings, **conf}) if local and launching else None
    if local and launching:
        # Its Python workers fork from a daemon that loaded the kernels (runtime/pydaemon.py),
        # which imports nothing from the folder the run was started in (pydaemon.SAFE_PATH).
        settings[DAEMON_MODULE] = pydaemon.MODULE
        settings[pydaemon.SAFE_PATH] = "1"
    global _archive
    _archive = archive
    if not _submitted():
        options = [*java_options, *(archive.options if archive is not None else ())]
        joined = " ".join([*options, conf.get(EXTRA_JAVA_OPTIONS, "")]).strip()
        if joined:
            settings[EXTRA_JAVA_OPTIONS] = joined
    merged = {**settings, **{k: v for k, v in conf.items() if k != EXTRA_JAVA_OPTIONS}}
    needed = packages_to_add(packages or {}, merged)
    if needed and not _submitted():
        wanted = [p for p in (merged.get("spark.jars.packages") or "").split(",") if p]
        merged["spark.jars.packages"] = ",".join(dict.fromkeys([*wanted, *needed]))
    settings = merged
    jvm_log = None
    with preloaded(preload):
        if not _submitted() and SparkContext._gateway is None:
            jvm_log = _launch_jvm(settings, app_name, quiet_jvm)
        for k, v in settings.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
    building = None
    proc = jvm_process()
    if archive is not None and proc is not None and class_archive.build_after_exit(archive, spark, proc.pid):
        building = archive.archive
    if _submitted():
        _submitted_local_settings(spark, small_input)
    return Started(spark, False, heap_note, jvm_log, archive_building=building)


def _submitted_local_settings(spark: SparkSession, small_input: bool) -> None:
    """spark-submit chose a local master (--master local[2], an Airflow connection to
    local): the shuffle settings a local run started here gets, where the submit set none.
    They are runtime settings; with Spark's 200 shuffle partitions and adaptive execution
    the sample took 160 s under Airflow instead of about 50."""
    master = spark.sparkContext.master or ""
    if not re.fullmatch(r"local(\[.*\])?", master):  # not local-cluster[...]: executors of its own
        return
    given = spark.sparkContext.getConf()
    for k, v in local_settings(small_input, local_cores(master)).items():
        if not given.contains(k):
            spark.conf.set(k, v)


@contextlib.contextmanager
def preloaded(modules: Sequence[str]) -> Iterator[None]:
    """Import `modules` in a thread while the block runs (the JVM starting: seconds in which
    this process mostly waits), and wait for them at its end. Meant for libraries the JVM's
    start does not import itself (numba, pyarrow, matplotlib), so the two never import the
    same module at once. `module:function` also calls the module's function, of no
    arguments, after the import (a kernel's compiled code loaded). An import or call that
    fails here is left for the caller's own to raise where it would have anyway."""

    def load() -> None:
        for name in modules:
            module, _, function = name.partition(":")
            with contextlib.suppress(Exception):
                loaded = importlib.import_module(module)
                if function:
                    getattr(loaded, function)()

    thread = threading.Thread(target=load, name="neardup-preload", daemon=True)
    if modules:
        thread.start()
    try:
        yield
    finally:
        if modules:
            thread.join()


def local_settings(small_input: bool, cores: int) -> dict[str, str]:
    """Spark settings of a local-mode session of `cores` task slots (a user's --conf wins)."""
    if small_input:
        # A few MB: one shuffle partition per core, each a task with work to do (with
        # adaptive execution off nothing coalesces them).
        return {"spark.sql.shuffle.partitions": str(cores), **SMALL_INPUT_SETTINGS}
    # 200 shuffle partitions (Spark's default, sized for clusters) make a small local run
    # several times slower; a few per core keep both cores busy.
    return {"spark.sql.shuffle.partitions": str(max(8, 4 * cores))}


def local_cores(master: str) -> int:
    """Task slots of a local master: local -> 1, local[N] or local[N,F] -> N; local[*] and
    any other form -> this machine's cores (os.cpu_count; a container's limit is not
    looked up)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is not None and m.group(1) is None:
        return 1
    if m is not None and m.group(1) != "*":
        return max(1, int(m.group(1)))
    return os.cpu_count() or 1


# A long local run keeps C2, but only for code four times as hot as the JVM's default asks.
# Every query's generated classes, Janino compiling them, the tasks' deserialization: a
# long run keeps meeting lukewarm code, and on the 1M benchmark (2 cores) the C2 thread
# took 35 s of CPU, about a fifth of the run's JVM and Python work; with these thresholds
# 24 s, and the wall 5 % less (medians of interleaved runs; C1 alone was 9 % slower:
# signing and the band shuffle need C2's code). docs/performance.md, "JIT compilation".
LONG_RUN_C2 = (
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=2400",
    "-XX:Tier4CompileThreshold=60000",
    "-XX:Tier4BackEdgeThreshold=160000",
)
# C1 alone, and the JVM reserves a fifth of the code cache it reserves for tiered compilation
# (48 MB, not 240). A run of seconds never fills it; a session that lives on (a notebook's, the
# test suite's: 25 minutes of small jobs) does, and then the sweeper flushes and the JIT
# recompiles, over and over: the sweeper thread took 118 s of that JVM's 950 s of CPU.
SHORT_RUN_C1 = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")


def local_java_options(small_input: bool) -> list[str]:
    """The options of a local-mode JVM launched here (the user's extraJavaOptions follow)."""
    options = [
        # The JVM launched here runs every task: the throughput collector costs 6 % less
        # CPU than the default G1 on the 1M-document benchmark (it holds more heap).
        "-XX:+UseParallelGC",
        # Parallel GC gives the young generation a third of the heap by default, and an
        # array too large for the young generation's free space must fit in the old one:
        # with long documents the old generation ran out while a third of the heap sat in
        # the young one (1g failed on the heavy-tailed corpus; with a fifth it passes).
        "-XX:NewRatio=4",
        # Any OutOfMemoryError ends the JVM at once (Spark already does so for one in a
        # task; one in another thread would otherwise leave a driver that hangs).
        "-XX:+ExitOnOutOfMemoryError",
    ]
    if small_input:
        # A run of seconds ends before the C2 compiler's work pays off, and on few cores
        # its threads take CPU from the run: on the sample (2 cores) C1 alone took 40 %
        # less wall and CPU time (bench/results/small-runs.md). Long runs keep C2.
        options.extend(SHORT_RUN_C1)
    else:
        options.extend(LONG_RUN_C2)
    return options


def small_local_input(path: str, limit: int = SMALL_INPUT_BYTES) -> bool:
    """True if `path` is a local file, or a directory of them, of at most `limit` bytes in
    all (compressed as stored). Other schemes (s3a://, hdfs://) and table names are not
    looked at: False. Known before any JVM starts, from the file system alone."""
    if "://" in path and not path.startswith("file://"):
        return False
    local = Path(path.removeprefix("file://"))
    total = 0
    try:
        if local.is_file():
            return local.stat().st_size <= limit
        if not local.is_dir():
            return False
        for root, _, names in os.walk(local):
            for name in names:
                total += (Path(root) / name).stat().st_size
                if total > limit:  # a large directory is not walked to its end
                    return False
    except OSError:
        return False
    return True


def _size_local_heap(conf: Mapping[str, str], settings: dict[str, str]) -> str:
    """Choose the local JVM's heap unless the user did; returns the note for the first log line."""
    if DRIVER_MEMORY in conf:
        return f"JVM heap {conf[DRIVER_MEMORY]} (spark.driver.memory)"
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        return f"JVM heap {os.environ['SPARK_DRIVER_MEMORY']} (SPARK_DRIVER_MEMORY)"
    chosen = _spark_defaults().get(DRIVER_MEMORY)
    if chosen:
        return f"JVM heap {chosen} (spark-defaults.conf)"
    machine = machine_memory()
    if machine is None:
        return "JVM heap 1g (Spark's default: this machine's memory is unknown)"
    heap = local_heap(machine)
    settings[DRIVER_MEMORY] = format_size(heap)
    return f"JVM heap {human(heap)} (half of this machine's {human(machine)})"


def _spark_defaults() -> dict[str, str]:
    """spark-defaults.conf where spark-submit would read it."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir and os.environ.get("SPARK_HOME"):
        conf_dir = os.path.join(os.environ["SPARK_HOME"], "conf")
    if not conf_dir:
        return {}
    path = Path(conf_dir) / "spark-defaults.conf"
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#"):
                out[parts[0]] = parts[1].strip()
    return out


def _launch_jvm(settings: Mapping[str, str], app_name: str, quiet: bool) -> Path | None:
    """Start the JVM ourselves (as pyspark would) so its process handle is ours to watch,
    and, when quiet, its output goes to a log file."""
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False)
    conf.setAll([*settings.items(), ("spark.app.name", app_name)])
    popen: dict[str, Any] = {}
    path = None
    fd = None
    if quiet:
        folder = log_dir()
        prefix = "spark-" + time.strftime("%Y%m%d-%H%M%S-")
        if folder is None:
            prefix, folder = "neardup-" + prefix, Path(tempfile.gettempdir())
        made, name = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=folder)
        # Appending: the command line adds a failure's Python traceback at the end while the
        # JVM may still write; without O_APPEND the JVM's next line would overwrite it.
        fd = os.open(name, os.O_WRONLY | os.O_APPEND)
        os.close(made)
        path = Path(name)
        global _launched_log
        _launched_log = path
        popen = {"stdout": fd, "stderr": fd}
    try:
        gateway = launch_gateway(conf, popen_kwargs=popen)  # it adds its own keys to popen
    except Exception as e:
        if path is None:
            raise
        raise _launch_failure(path.read_text(errors="replace")) from e
    finally:
        if fd is not None:
            os.close(fd)
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm
    global _launched_here
    _launched_here = True
    return path


# The names _launch_jvm gives the logs it writes in log_dir() (mkstemp adds 8 characters of
# its own): cleaning up deletes nothing else.
_LOG_NAME = re.compile(r"spark-[0-9]{8}-[0-9]{6}-[A-Za-z0-9_]{8}\.log")


def log_dir(root: Path | None = None) -> Path | None:
    """`<tmp>/neardup-<user>/` (made if missing, mode 700), with logs older than LOG_DAYS
    deleted; None, with one warning, if it is not a directory of this user's that only they
    can write (neardup.private_dir): logs then go to the temporary directory itself, as
    mkstemp makes them (mode 600, a name no one else holds)."""
    base = Path(tempfile.gettempdir()) if root is None else root
    try:
        folder = private_dir(base, (f"neardup-{_user()}",))
    except NotPrivate as e:
        warn_once(e, "the JVM's log")
        return None
    except OSError:
        return None
    old = time.time() - LOG_DAYS * 86400
    for f in folder.iterdir():
        # lstat: a link's own time, and the link (not what it names) would go; a log still
        # being written has a fresh modification time.
        with contextlib.suppress(OSError):
            st = f.lstat()
            if _LOG_NAME.fullmatch(f.name) and stat.S_ISREG(st.st_mode) and st.st_mtime < old:
                f.unlink()
    return folder


def _user() -> str:
    try:
        import getpass

        name = getpass.getuser()
    except Exception:  # no name for this uid (some containers)
        return str(os.getuid())
    return name if re.fullmatch(r"[\w.-]+", name) else str(os.getuid())


def _launch_failure(log_text: str) -> NeardupError:
    """Why the JVM did not start, from its own output."""
    missing = re.search(r"unresolved dependency: ([\w.\-]+#[\w.\-]+;[\w.\-]+)", log_text)
    if missing:
        group, rest = missing.group(1).split("#", 1)
        artifact, version = rest.split(";", 1)
        coordinate = f"{group}:{artifact}:{version}"
        return NeardupError(
            f"Spark could not fetch the package {coordinate} (spark.jars.packages): it is neither in "
            f"~/.m2 nor served by a repository Spark reaches; fetch it with mvn dependency:get "
            f"-Dartifact={coordinate}, or set components.backend=builtin"
        )
    lines = [line for line in log_text.splitlines() if "Exception" in line or "Error" in line]
    detail = lines[-1].strip()[:300] if lines else "no reason in its output"
    return NeardupError(f"the Spark JVM did not start: {detail}")


def launched_log() -> Path | None:
    """The log file of the JVM this process launched quietly, also when the session then
    failed to start (Started is never returned then)."""
    return _launched_log


def launched_here() -> bool:
    """Whether this module launched the JVM of this process's session (not spark-submit,
    not a session someone else made, as in a notebook or under Databricks)."""
    return _launched_here


def archive_report() -> dict[str, Any] | None:
    """For report.json: the class archive the JVM launched here was given to map ("mapped":
    true; the JVM ignores one that does not match it) or records the classes for (false);
    None where it had neither."""
    if _archive is None:
        return None
    return {"path": str(_archive.archive), "mapped": _archive.record is None}


def jvm_process() -> Any:
    """The Popen of a JVM this process launched, or None (spark-submit launched us)."""
    gateway = SparkContext._gateway
    return getattr(gateway, "proc", None) if gateway is not None else None


def heap_and_slots(spark: SparkSession) -> tuple[int, int, str]:
    """(heap bytes one task runs in, concurrent tasks sharing it, 'driver' | 'executor')."""
    sc = spark.sparkContext
    master = sc.master or "local[*]"
    if master.startswith("local"):
        runtime: Any = java_class(spark._jvm, "java.lang.Runtime").getRuntime()
        return int(runtime.maxMemory()), _local_slots(master), "driver"
    conf = sc.getConf()
    heap = parse_size(conf.get("spark.executor.memory", "1g") or "1g", "m")
    cores = conf.get("spark.executor.cores")
    if cores:
        return heap, max(1, int(cores)), "executor"
    # Standalone gives an executor every core of its worker unless told otherwise.
    jsc: Any = sc._jsc
    executors = max(1, len(jsc.sc().statusTracker().getExecutorInfos()) - 1)
    return heap, max(1, sc.defaultParallelism // executors), "executor"


def _local_slots(master: str) -> int:
    inside = master[len("local") :].strip("[]")
    first = inside.split(",")[0] if inside else "1"
    if first == "*":
        return os.cpu_count() or 1
    try:
        return max(1, int(first))
    except ValueError:
        return os.cpu_count() or 1


def _submitted() -> bool:
    """True when launched by spark-submit, which already chose the master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_SUBMIT" in os.environ
