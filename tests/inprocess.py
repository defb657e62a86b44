"""The command line's entry (`neardup.cli.main`) run in the test's own process: what a
command returned and printed, for tests where the process boundary is not the point."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

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


# The test session interprets expressions (tests/conftest.py); Spark's defaults compile them.
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


@contextlib.contextmanager
def compiled_expressions(spark: Any) -> Iterator[None]:
    """Code generation on for the block, as the command line runs: for the commands that no
    process in tests/e2e runs (index, decontaminate), so that they run compiled somewhere."""
    before = {k: spark.conf.get(k) for k in COMPILED}
    for k, v in COMPILED.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
