"""Errors that end a run with a distinct exit code and one line on stderr."""

from __future__ import annotations

import contextlib


class NeardupError(Exception):
    """Base class: an expected failure, reported as `neardup: error: <message>`."""

    exit_code = 1


class UsageError(NeardupError):
    """Bad command line or configuration (exit 2)."""

    exit_code = 2


class InputDataError(NeardupError):
    """The input data cannot be processed as a whole (exit 3)."""

    exit_code = 3


class IndexRefusedError(NeardupError):
    """The index cannot serve this run: built with other parameters or another neardup's
    hashing, ids of another type, or its texts changed since they were indexed (exit 4)."""

    exit_code = 4


class IndexDamagedError(IndexRefusedError):
    """The index's files are not those its manifest lists (one missing, or of another size),
    or one cannot be read (exit 4). The message names the file."""


class StorageError(NeardupError):
    """An output, staging or index path cannot be written: the disk is full, the folder is
    read-only or not ours to write (exit 5). The message names the path."""

    exit_code = 5


class LockedError(NeardupError):
    """Another run holds the lease on this output or index (exit 6). The message names the
    holder: host, pid and start time."""

    exit_code = 6


class InvariantError(NeardupError):
    """The job's own end-of-run checks failed; nothing was published (exit 1)."""

    exit_code = 1


_STAGE_ATTR = "neardup_stage"


def tag_stage(e: BaseException, stage: str) -> None:
    """Remember the stage an exception came from (the innermost one wins)."""
    if getattr(e, _STAGE_ATTR, None) is None:
        with contextlib.suppress(AttributeError, TypeError):  # a type without a __dict__
            setattr(e, _STAGE_ATTR, stage)


def stage_of(e: BaseException) -> str | None:
    """The stage an exception (or the one it was raised while handling) came from."""
    seen: BaseException | None = e
    while seen is not None:
        stage = getattr(seen, _STAGE_ATTR, None)
        if stage is not None:
            return str(stage)
        seen = seen.__cause__ or seen.__context__
    return None
