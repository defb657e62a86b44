"""numba's on-disk cache, keyed to the kernels' own sources (see the package docstring)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"
# The directory the per-digest cache directories go under, as the first import found it;
# Python workers inherit it (and NUMBA_CACHE_DIR, which by then names a digest directory).
_BASE = "NEARDUP_NUMBA_CACHE_BASE"


def sources_digest() -> str:
    """A digest of every module of this package, the compiled kernels' whole source."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _base() -> str:
    """NUMBA_CACHE_DIR if the user set one, else the user's cache directory."""
    inherited = os.environ.get(_BASE)
    if inherited:
        return inherited
    user = os.environ.get(ENV)
    if user:
        return user
    return str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba")


def cache_dir() -> Path:
    """`<base>/neardup-<digest of the kernel sources>`."""
    return Path(_base()) / f"neardup-{sources_digest()}"


def configure() -> None:
    """Point numba's cache at `cache_dir()`, before or after numba itself was imported.

    Does nothing when the kernels are not plain files (imported from a zip on a cluster):
    numba cannot cache those anyway.
    """
    if not Path(__file__).is_file():
        return
    base = _base()
    path = str(Path(base) / f"neardup-{sources_digest()}")
    os.environ[_BASE] = base
    os.environ[ENV] = path
    numba = sys.modules.get("numba")
    if numba is not None:  # imported earlier: its config already read the environment
        numba.config.CACHE_DIR = path
