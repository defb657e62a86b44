"""The command line's entry (`neardup.cli.main`) run in the test's own process: what a
command returned and printed, for tests where the process boundary is not the point."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from neardup.cli import main


class Ran(NamedTuple):
    code: int
    out: str
    err: str


def neardup(capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """One command through `main` (on the active session, if it starts Spark): its exit code,
    stdout and stderr."""
    capsys.readouterr()  # only this command's output
    code = main(list(args))
    out, err = capsys.readouterr()
    return Ran(code, out, err)
