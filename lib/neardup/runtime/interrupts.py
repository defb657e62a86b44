"""Ctrl-C (SIGINT) and SIGTERM while a command runs: its Spark jobs cancelled, nothing
published, one line and exit 130 (runtime/failures.py's EXIT_INTERRUPTED).

pyspark's own SIGINT handler cancels the jobs with a call into the JVM made from the
handler, that is on the main thread's Py4J connection, which is in the middle of a call
most of the time (a `collect`, a write): the handler then reads that call's answer as its
own, and every later call on the connection reads the answer of the one before. What
reached the user was a Py4J error from some clean-up code, exit 1. The handler here drops
the main thread's connection instead (its next call opens a new one; the JVM finishes
the old call and writes to a closed socket), cancels the run's job groups from a thread of
its own, and raises `Interrupted`.

SIGTERM (a scheduler stopping the job, `kill`) is handled the same and ends with 130 too,
where nothing else in the process handles it (a host's own handler is left alone).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

log = logging.getLogger("neardup")

# How long the handler waits for the JVM to accept the cancellation.
CANCEL_SECONDS = 10.0


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal (a KeyboardInterrupt, so that no `except
    Exception` of the job's catches it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal_name = signal.Signals(signum).name


class _State:
    def __init__(self) -> None:
        self.active = False  # a command is running with our handlers in place
        self.holding = 0  # depth of `held()` blocks
        self.pending: int | None = None  # a signal that arrived while held
        self.installed: dict[int, Any] = {}  # signal -> the handler ours replaced


_state = _State()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.holding:
        _state.pending = signum  # raised when the held block ends
        return
    _state.holding += 1  # a second Ctrl-C while cancelling is the same interruption
    try:
        _drop_main_connection()
        _cancel_jobs()
    finally:
        _state.holding -= 1
        _state.pending = None  # a second signal meanwhile: this same interruption
    raise Interrupted(signum)


def _drop_main_connection() -> None:
    """Close this thread's Py4J connection: if a call is under way on it, its answer is
    never read as another call's."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    client = getattr(gateway, "_gateway_client", None)
    getter = getattr(client, "get_thread_connection", None)
    if getter is None:  # no JVM yet, or an older Py4J without pinned threads
        return
    with contextlib.suppress(Exception):
        connection = getter()
        if connection is not None:
            connection.close()


def _cancel_jobs() -> None:
    """Cancel the job groups of the runs under way (all of the context's jobs where no run
    has started one), from a thread with a Py4J connection of its own."""
    from pyspark import SparkContext

    from neardup.runtime.jobgroups import active_groups

    sc = SparkContext._active_spark_context
    if sc is None:
        return
    groups = active_groups()

    def cancel() -> None:
        with contextlib.suppress(Exception):  # a JVM already gone has nothing to cancel
            if groups:
                for group in groups:
                    sc.cancelJobGroup(group)
            else:
                sc.cancelAllJobs()

    worker = threading.Thread(target=cancel, name="neardup-cancel", daemon=True)
    worker.start()
    worker.join(CANCEL_SECONDS)


def install() -> None:
    """Our handlers for SIGINT, and for SIGTERM where its handler is the default. Called
    again once the session is up: creating a SparkContext installs pyspark's for SIGINT."""
    if not _state.active or not _main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        current = signal.getsignal(signum)
        if current is _on_signal:
            continue
        if signum == signal.SIGTERM and current is not signal.SIG_DFL and signum not in _state.installed:
            continue  # the host handles SIGTERM itself
        _state.installed.setdefault(signum, current)
        signal.signal(signum, _on_signal)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """A command's run: interrupts handled as above, the previous handlers back at the end."""
    if not _main_thread() or _state.active:
        yield
        return
    _state.active = True
    try:
        install()
        yield
    finally:
        for signum, before in _state.installed.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, before if before is not None else signal.SIG_DFL)
        _state.installed.clear()
        _state.active = False
        _state.pending = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A block a signal must not cut in two: publication (the output moved into place, an
    index's manifest committed), a few file operations. A signal arriving in it lets it
    finish and the command end as it would have: whole, published (and said so); an exit
    130 always means nothing was published."""
    _state.holding += 1
    try:
        yield
    finally:
        _state.holding -= 1
        if not _state.holding and _state.pending is not None:
            name = signal.Signals(_state.pending).name
            _state.pending = None
            log.warning("%s arrived while publishing: the run finished publishing first", name)


def interruption(e: BaseException) -> KeyboardInterrupt | None:
    """The interruption behind `e`: itself, or one that clean-up code raised another
    error while handling (a Py4J error from a call that the interruption cut short)."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
