"""The command line as a process, and the sample corpus (shared by the end-to-end tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
# The line a run prints when it leaves a process behind to build the class archive (a regex).
ARCHIVE_NOTE = (
    r"class archive: built in the background after this run, for faster starts \(/\S+\.jsa; "
    r"NEARDUP_CLASS_ARCHIVE=0 turns it off\)"
)


def neardup(
    *args: str, timeout: int = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "neardup", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
