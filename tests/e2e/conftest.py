"""Fixtures of the end-to-end tier shared by its modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import SAMPLE, neardup
from heavy import HeavyCorpus, build

ROOT = Path(__file__).resolve().parents[2]


def clean_copy(dest: Path) -> Path:
    """The tracked files, as a fresh clone has them (no build/ left by an earlier build)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src, dst = ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel users install, built once per test session from a clean copy of the
    tracked files (test_wheel.py reads it, test_databricks.py installs it)."""
    root = tmp_path_factory.mktemp("wheel")
    source = clean_copy(root / "src")
    dist = root / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = dist.glob("neardup-*.whl")
    return built


@pytest.fixture(scope="session")
def heavy_corpus(tmp_path_factory: pytest.TempPathFactory) -> HeavyCorpus:
    """The ~140 MB heavy-tailed corpus (heavy.py), built once per test session."""
    return build(tmp_path_factory.mktemp("heavy"))


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One uninterrupted run of the README's first command (to a temporary output), shared by
    the tests of its outputs (test_cli.py) and of its report.html (test_report_html.py)."""
    out = tmp_path_factory.mktemp("sample") / "out"
    proc = neardup("dedup", "--input", str(SAMPLE), "--output", str(out))
    return out, proc
