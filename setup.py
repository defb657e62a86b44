"""The wheel's build: setuptools as pyproject.toml configures it, plus the kernels compiled
ahead of use (lib/neardup/kernels/precompile.py) into the built package's
neardup/kernels/_compiled/, so a new machine or executor loads code instead of compiling
it (docs/design.md, "Compiled kernels"). Not for editable installs: a source tree compiles
on first use and keeps the code in the user's cache.

NEARDUP_PRECOMPILE=0 builds without it (the kernels then compile on first use);
NEARDUP_PRECOMPILE_TARGETS=a,b names the CPU targets (default: precompile.default_targets);
NEARDUP_PRECOMPILED=DIR names a folder compiled before (spark-submit.sh's build/compiled),
copied instead of compiling when it holds the code of this build's key (its sources and the
build's numba, llvmlite and numpy) for the targets.
A failure to compile fails the build: a wheel silently without the code would be slower
everywhere it goes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyPrecompiled(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("NEARDUP_PRECOMPILE", "1") == "0":
            return
        lib = Path(self.build_lib).resolve()
        out = lib / "neardup" / "kernels" / "_compiled"
        cmd = [sys.executable, "-m", "neardup.kernels.precompile", str(out), "--lib", str(lib)]
        targets = os.environ.get("NEARDUP_PRECOMPILE_TARGETS")
        if targets:
            cmd += ["--targets", targets]
        compiled = os.environ.get("NEARDUP_PRECOMPILED")
        if compiled:
            cmd += ["--reuse", compiled]
        env = {**os.environ, "PYTHONPATH": str(lib)}
        subprocess.run(cmd, check=True, env=env)


setup(cmdclass={"build_py": BuildPyPrecompiled})
