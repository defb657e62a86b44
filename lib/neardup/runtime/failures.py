"""What to tell the user when Spark's JVM dies or runs out of memory (no Spark here).

When the local JVM dies, Python sees only a broken socket (`ConnectionRefusedError`
from py4j); the cause is in the JVM's exit status and its own output. On a cluster an
executor's death reaches the driver as a task failure, repeated until Spark's retries
are exhausted. Either way the user reads one line: what happened, in which stage, and
which setting to change.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from neardup.runtime.memory import GiB, format_size, parse_size

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
