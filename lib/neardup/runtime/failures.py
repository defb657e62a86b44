"""What to tell the user when a run fails: Spark's JVM died or ran out of memory, an
input file could not be read, or anything else, as one line and an exit code (no Spark is
imported here; the command line prints what `RunFacts.explain` says).

When the local JVM dies, Python sees only a broken socket (`ConnectionRefusedError`
from py4j); the cause is in the JVM's exit status and its own output. On a cluster an
executor's death reaches the driver as a task failure, repeated until Spark's retries
are exhausted. Either way the user reads one line: what happened, in which stage, and
which setting to change.
"""

from __future__ import annotations

import re
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neardup.errors import (
    IndexRefusedError,
    InputDataError,
    LockedError,
    NeardupError,
    StorageError,
    UsageError,
    stage_of,
)
from neardup.runtime.localpaths import why_not_made
from neardup.runtime.memory import GiB, format_size, parse_size

# The command line's exit codes: done, anything else, usage or config, input data, index
# refused or damaged, storage (disk full, unwritable), locked by another run (each error
# class carries its own), and interrupted (Ctrl-C or SIGTERM: 128 + SIGINT, as shells do).
EXIT_OK = 0
EXIT_FAILED, EXIT_USAGE = NeardupError.exit_code, UsageError.exit_code
EXIT_INPUT, EXIT_INDEX = InputDataError.exit_code, IndexRefusedError.exit_code
EXIT_STORAGE, EXIT_LOCKED = StorageError.exit_code, LockedError.exit_code
EXIT_INTERRUPTED = 130

# Spark's exit code for an OutOfMemoryError in a task thread (SparkExitCode.OOM), and
# the JVM's own with -XX:+ExitOnOutOfMemoryError.
SPARK_OOM_EXIT = 52
JVM_OOM_EXIT = 3

_OOM = re.compile(r"java\.lang\.OutOfMemoryError: ?([^\n\r]*)")
_SPARK_OOM = re.compile(r"SparkOutOfMemoryError[:\]]? ?\[?[A-Z_.]*\]? ?([^\n\r]*)")
_EXECUTOR_LOST = re.compile(r"ExecutorLostFailure \(executor (\S+) exited[^)]*\) Reason: ([^\n\r]*)")
_EXIT_CODE = re.compile(r"exit(?:ed)?(?: with)?(?: code| status)? (-?\d+)", re.IGNORECASE)
_HS_ERR = re.compile(r"(\S*hs_err_pid\d+\.log)")
_FAILED_TIMES = re.compile(r"failed (\d+) times")


@dataclass(frozen=True)
class Diagnosis:
    message: str  # the one line after `neardup: error:`


def more_memory(current: str | None) -> str:
    """A size to suggest: twice the current one (at least 2g), in whole gigabytes."""
    try:
        now = parse_size(current, "m") if current else GiB
    except ValueError:
        now = GiB
    return format_size(max(2 * GiB, -(-2 * now // GiB) * GiB))


def _where(stage: str | None) -> str:
    return f" in stage {stage}" if stage else " before the first stage"


def _oom_kind(text: str) -> str | None:
    m = _OOM.search(text)
    if m:
        return m.group(1).strip() or "OutOfMemoryError"
    m = _SPARK_OOM.search(text)
    if m:
        return (m.group(1).strip() or "SparkOutOfMemoryError")[:160]
    return None


def local_jvm_died(exit_code: int, log_text: str, stage: str | None, heap: str | None) -> Diagnosis:
    """The local JVM (driver and executor in one) exited while the job ran."""
    kind = _oom_kind(log_text)
    hint = f"give it more with --conf spark.driver.memory={more_memory(heap)}"
    if kind or exit_code in (SPARK_OOM_EXIT, JVM_OOM_EXIT):
        return Diagnosis(
            f"the Spark JVM ran out of memory ({kind or 'Java heap space'}){_where(stage)}; {hint}"
        )
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        why = " (the operating system's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else ""
        return Diagnosis(
            f"the Spark JVM was killed by {name}{why}{_where(stage)}; if memory ran short, lower "
            f"spark.driver.memory to leave room for the Python workers, or use a larger machine"
        )
    crash = _HS_ERR.search(log_text)
    detail = f", crash report {crash.group(1)}" if crash else ""
    return Diagnosis(f"the Spark JVM stopped with exit code {exit_code}{detail}{_where(stage)}")


def task_failure(error_text: str, stage: str | None, local: bool, heap: str | None) -> Diagnosis | None:
    """A Spark job that failed because memory ran out or executors were lost, else None."""
    lost = _EXECUTOR_LOST.search(error_text)
    kind = _oom_kind(error_text)
    if lost is None and kind is None:
        return None
    if local:
        hint = f"give it more with --conf spark.driver.memory={more_memory(heap)}"
        return Diagnosis(f"the Spark JVM ran out of memory ({kind}){_where(stage)}; {hint}")
    times = _FAILED_TIMES.search(error_text)
    tries = f" after {times.group(1)} attempts" if times else ""
    hint = f"give them more with --conf spark.executor.memory={more_memory(heap)}"
    if lost is not None:
        reason = lost.group(2).strip()
        code = _EXIT_CODE.search(reason)
        if kind or (code and int(code.group(1)) in (SPARK_OOM_EXIT, JVM_OOM_EXIT)):
            return Diagnosis(
                f"Spark executors ran out of memory{_where(stage)} and the task failed{tries}; {hint}"
            )
        return Diagnosis(
            f"Spark executors were lost{_where(stage)} and the task failed{tries} ({reason[:200]}); "
            f"if they were killed for memory, {hint}, or raise spark.executor.memoryOverhead for "
            "the Python workers"
        )
    return Diagnosis(f"Spark executors ran out of memory ({kind}){_where(stage)}{tries}; {hint}")


def require_pyspark() -> None:
    """A UsageError with what to install, where pyspark is missing (before anything imports it)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError(
            "pyspark is not installed: pip install 'neardup[spark]' (where Spark is provided, "
            "as on Databricks or a cluster image, install neardup into that Python instead)"
        ) from None


# How Spark names an input file it could not read. Spark 4 wraps every such failure in
# FAILED_READ_FILE; Spark 3.5 wraps some ("Details:"), names the file of a column it cannot
# convert, and lets parquet-mr's own exception for a corrupt footer through unwrapped.
_READ_FAILURES = (
    re.compile(r"FAILED_READ_FILE\.\w+\] Encountered error while reading file (\S+?)\.?\s"),
    re.compile(r"Encountered error while reading file (\S+?)\. Details:"),
    re.compile(r"Parquet column cannot be converted in file (\S+?)\. Column:"),
    re.compile(r"RuntimeException: (\S+) is not a Parquet file"),
)
_CAUSE = re.compile(r"Caused by: [\w.$]+: (.+)")


def unreadable_file(e: BaseException) -> tuple[str, str] | None:
    """A Spark failure to read a file -> (the file, as Spark names it; the deepest cause),
    else None."""
    text = str(e)
    m = next((m for pattern in _READ_FAILURES if (m := pattern.search(text))), None)
    if m is None:
        return None
    causes = _CAUSE.findall(text)
    return m.group(1), causes[-1].strip() if causes else "unreadable"


_JAVA_EXCEPTION = re.compile(r"^(?:: |Caused by: )[\w.$]+: (.+)$", re.MULTILINE)


def java_cause(e: BaseException) -> str:
    """The deepest Java exception's message in a Py4J error's text (its first line names
    only the method called), else the first line."""
    text = str(e).strip()
    found = _JAVA_EXCEPTION.findall(text)
    if found:
        return str(found[-1]).strip()
    return text.splitlines()[0] if text else type(e).__name__


def input_error_from(e: BaseException) -> InputDataError | None:
    """A Spark failure caused by an unreadable input file (truncated or corrupt Parquet,
    a bad gzip stream) -> an input error naming the file, else None."""
    found = unreadable_file(e)
    if found is None:
        return None
    return InputDataError(f"input file {found[0]} cannot be read: {found[1][:300]}")


# What an operating system says (through Java's IOException or Python's OSError) when the
# storage refuses a write, and what the user reads; Hadoop's own words where it says less.
_STORAGE_REASONS = (
    ("No space left on device", "no space left on device"),
    ("Disk quota exceeded", "disk quota exceeded"),
    ("Read-only file system", "read-only file system"),
    ("Permission denied", "permission denied"),
)
_MKDIRS = re.compile(r"Mkdirs failed to create (.+?)(?: \(exists=|$)", re.MULTILINE)
# Where a write failed, as Spark, Hadoop, Java and Python name it (the first that matches).
# A path may hold spaces: each pattern reads to a delimiter of its own message.
_WRITE_PATHS = (
    re.compile(r"Task failed while writing rows to (.+?)\.?(?: SQLSTATE|$)", re.MULTILINE),
    _MKDIRS,
    re.compile(r"(?:FileNotFound|IO)Exception: (.+?) \((?:No space|Read-only|Permission|Disk quota)"),
    re.compile(r"\[Errno \d+\] [^:\n]+: '([^'\n]+)'"),
)


def storage_reason(text: str) -> str | None:
    """Why the storage refused a write, from a failure's text, or None. Hadoop's local
    file system gives no reason for a folder it could not make: the system is asked."""
    said = next((said for marker, said in _STORAGE_REASONS if marker in text), None)
    if said is None and (m := _MKDIRS.search(text)):
        said = why_not_made(m.group(1).strip())
    return said


def storage_error_from(e: BaseException, writes: str | None) -> StorageError | None:
    """A failure because storage refused a write (a full disk, a read-only or foreign
    folder, a quota) -> a StorageError naming the path, else None. `writes` is the output
    or index the command writes, named where the failure does not say which path."""
    if isinstance(e, StorageError):
        return e
    text = str(e)
    reason = storage_reason(text)
    if reason is None:
        return None
    m = next((m for pattern in _WRITE_PATHS if (m := pattern.search(text))), None)
    if isinstance(e, OSError) and e.filename:
        where = str(e.filename)
    elif m is not None:
        where = m.group(1).strip()
    elif writes is not None:
        where = f"{writes} (or its staging folder, or Spark's local folders: spark.local.dir)"
    else:
        where = "Spark's local folders (spark.local.dir) or the output"
    return StorageError(f"cannot write {where}: {reason}{_where(stage_of(e))}")


def describe(e: BaseException) -> str:
    """The first meaningful line of an exception, Spark's or Python's: for a call into the
    JVM that failed, the Java exception's line (Py4J's own first line names only the call)."""
    text = str(e).strip().splitlines()
    head = text[0] if text else ""
    java = next((line[2:] for line in text[1:3] if line.startswith(": ")), None)
    if java is not None and head.startswith("An error occurred while calling"):
        return java.strip()[:500]
    return f"{type(e).__name__}: {head[:500]}"


@dataclass(frozen=True)
class Told:
    """What the user reads of a failure, and how the command line ends."""

    message: str
    exit_code: int
    discard_log: bool = False  # the line says it all: Spark's log is not kept
    jvm_died: bool = False  # printed even with --debug, before the traceback


class RunFacts:
    """What explaining a failure needs to know about the session: the JVM process, its log,
    the heap it was given, and the master."""

    def __init__(self) -> None:
        self.started: Any = None  # runtime.session.Started, once the session is up
        self.heap: str | None = None
        self.log: Path | None = None  # the JVM's log file, if neardup launched it quietly
        self.writes: str | None = None  # the output or index the command writes

    def discard_log(self) -> None:
        """The run ended well, or with an error whose one line says it all."""
        if self.log is not None:
            self.log.unlink(missing_ok=True)

    def log_note(self) -> str:
        return f" (Spark's log: {self.log})" if self.log is not None else ""

    def keep_traceback(self, e: BaseException) -> str:
        """Append the Python traceback of `e` to Spark's log, where the user's one line
        points; what to add to that line ("rerun with --debug" where there is no log)."""
        if self.log is None:
            return " (rerun with --debug for the traceback)"
        try:
            with self.log.open("a", encoding="utf-8") as f:
                f.write("\nneardup: the failure's Python traceback:\n")
                f.write("".join(traceback.format_exception(e)))
        except OSError:
            return " (rerun with --debug for the traceback)"
        return f" (Spark's log, with the traceback: {self.log})"

    def explain(self, e: BaseException) -> Told:
        """The one line for an exception that is not one of neardup's own errors."""
        died = self.jvm_death(e)
        if died is not None:
            return Told(died, EXIT_FAILED, jvm_died=True)
        known = input_error_from(e) or storage_error_from(e, self.writes)
        if known is not None:
            return Told(str(known), known.exit_code, discard_log=True)
        memory = self.memory_failure(e)
        if memory is not None:
            return Told(memory, EXIT_FAILED)
        stage = stage_of(e)
        where = f"stage {stage} failed: " if stage else ""
        return Told(where + describe(e) + self.keep_traceback(e), EXIT_FAILED)

    def jvm_death(self, e: BaseException) -> str | None:
        """The one-line story of a local JVM that died under us, or None if it lives."""
        try:
            from neardup.runtime.session import jvm_process
        except ImportError:  # no pyspark, so no JVM of ours
            return None
        proc = jvm_process()
        if proc is None:
            return None
        try:
            code = proc.wait(timeout=5)
        except Exception:  # still running: not a JVM death
            return None
        path = self.log
        text = path.read_text(errors="replace") if path is not None and path.exists() else ""
        return local_jvm_died(code, text, stage_of(e), self.heap).message + self.log_note()

    def memory_failure(self, e: BaseException) -> str | None:
        local = self.started is None or str(self.started.spark.sparkContext.master).startswith("local")
        found = task_failure(str(e), stage_of(e), local, self.heap)
        return found.message + self.log_note() if found is not None else None
