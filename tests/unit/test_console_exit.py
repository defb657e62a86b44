"""`neardup.cli.console` exits at once only where the process runs neardup as its program:
its main module the `neardup` console script (or `neardup.__main__`), never a host that
loaded the entry point (Databricks' driver, a notebook, a task runner)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = "import neardup.cli as c\nprint(c._the_program())\n"


def test_the_program_is_the_console_script_and_no_host(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    script, host = tmp_path / "bin" / "neardup", tmp_path / "host.py"
    for path in (script, host):
        path.write_text(PROBE)
    seen = [
        subprocess.run([sys.executable, str(p)], capture_output=True, text=True, check=True).stdout.strip()
        for p in (script, host)
    ]
    inline = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert seen == ["True", "False"] and inline.strip() == "False"
