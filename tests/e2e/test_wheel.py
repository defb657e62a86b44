"""The wheel users install holds the job and nothing else."""

from __future__ import annotations

import zipfile
from pathlib import Path


def test_wheel_holds_the_package_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"neardup", next(t for t in top if t.endswith(".dist-info"))}
    assert "neardup/conf/default.yaml" in names and "neardup/kernels/minhash.py" in names
    assert "neardup/conf/log4j2.properties" in names  # for spark-submit's driver (README)
    assert not [n for n in names if "synth" in n or "testkit" in n or "/tests/" in n or "test_" in n]
