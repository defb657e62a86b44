"""Fixtures of the end-to-end tier shared by its modules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_process import SAMPLE, neardup
from heavy import HeavyCorpus, build


@pytest.fixture(scope="session")
def heavy_corpus(tmp_path_factory: pytest.TempPathFactory) -> HeavyCorpus:
    """The ~1 GB heavy-tailed corpus (heavy.py), built once per test session."""
    return build(tmp_path_factory.mktemp("heavy"))


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One uninterrupted run of the README's first command (to a temporary output), shared by
    the tests of its outputs (test_cli.py) and of its report.html (test_report_html.py)."""
    out = tmp_path_factory.mktemp("sample") / "out"
    proc = neardup("dedup", "--input", str(SAMPLE), "--output", str(out))
    return out, proc
