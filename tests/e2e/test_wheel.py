"""The wheel users install holds the job and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _clean_copy(dest: Path) -> Path:
    """The tracked files, as a fresh clone has them (no build/ left by an earlier build)."""
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        src, dst = ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


def test_wheel_holds_the_package_only(tmp_path: Path) -> None:
    source = _clean_copy(tmp_path / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("neardup-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"neardup", next(t for t in top if t.endswith(".dist-info"))}
    assert "neardup/conf/default.yaml" in names and "neardup/kernels/minhash.py" in names
    assert "neardup/conf/log4j2.properties" in names  # for spark-submit's driver (README)
    assert not [n for n in names if "synth" in n or "testkit" in n or "/tests/" in n or "test_" in n]
