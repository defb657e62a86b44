"""The wheel users install holds the job and nothing else."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from neardup.kernels.precompile import default_targets


def test_wheel_holds_the_package_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"neardup", next(t for t in top if t.endswith(".dist-info"))}
    assert "neardup/conf/default.yaml" in names and "neardup/kernels/minhash.py" in names
    assert "neardup/conf/log4j2.properties" in names  # for spark-submit's driver (README)
    assert not [n for n in names if "synth" in n or "testkit" in n or "/tests/" in n or "test_" in n]


def test_wheel_ships_the_kernels_compiled(wheel: Path) -> None:
    """The build compiled every kernel for the portable x86-64 levels (setup.py): the
    manifest names the files shipped, and every kernel module has an index among them."""
    z = zipfile.ZipFile(wheel)
    folder = "neardup/kernels/_compiled/"
    manifest = json.loads(z.read(folder + "manifest.json"))
    # x86-64-v4 (where the building CPU has AVX-512), x86-64-v3, generic on x86-64
    assert manifest["targets"] == list(default_targets())
    shipped = {n[len(folder) :] for n in z.namelist() if n.startswith(folder)} - {"manifest.json"}
    assert shipped == set(manifest["files"])
    modules = {n.split(".")[0] for n in shipped if n.endswith(".nbi")}
    assert {"hashing", "minhash", "textnorm", "similarity", "contamination", "measure"} <= modules
