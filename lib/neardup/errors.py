"""Errors that end a run with a distinct exit code and one line on stderr."""

from __future__ import annotations


class NeardupError(Exception):
    """Base class: an expected failure, reported as `neardup: error: <message>`."""

    exit_code = 1


class UsageError(NeardupError):
    """Bad command line or configuration (exit 2)."""

    exit_code = 2


class InputDataError(NeardupError):
    """The input data cannot be processed as a whole (exit 3)."""

    exit_code = 3


class InvariantError(NeardupError):
    """The job's own end-of-run checks failed; nothing was published (exit 1)."""

    exit_code = 1
