"""numba's on-disk cache of the kernels' compiled code, and the compiled code the wheel ships.

Where: ``<NUMBA_CACHE_DIR>/neardup-<key>`` or ``<the user's cache>/numba/neardup-<key>``, and
where that cannot be written ``<tmp>/neardup-numba-<uid>/neardup-<key>``: one flat directory
for every kernel, whichever way the package was imported (installed files, a source tree or a
zip shipped with --py-files). The key is a digest of every kernel source (numba's own cache
notices an edit to the module defining a kernel but not to the modules whose functions it
calls: a stale cache would silently keep old code) and of what compiled code depends on:
the numba, llvmlite and numpy versions, the Python implementation and version, the
operating system and the machine. A locator of our own (`install`) gives numba that
directory and the key as every kernel's source stamp, so nothing depends on where the
sources are or on their files' times. numba loads its cache with pickle, so the folders
neardup names there are made with mode 0700 and used only if nobody else can write to them
(neardup.private_dir); where no folder passes, the kernels compile in memory (jit.py), with
one warning naming the folder.

Shipped code: the wheel's build (setup.py, `neardup.kernels.precompile`) compiles every
kernel into ``neardup/kernels/_compiled/``, for portable CPU targets (on x86-64 the psABI
levels x86-64-v4, x86-64-v3 and the baseline, "generic"), with a manifest naming the key it
was compiled under. When a process finds no cache directory for its key and the shipped
manifest names that same key, the shipped files become the cache directory (copied into a
temporary directory, then renamed into place: whole or not at all), and numba's CPU target
is set to the best shipped level the host runs. A new machine or a new executor then loads
code instead of compiling it. When anything differs (another numba, Python or machine, an
edited source), nothing is copied and the kernels compile for the host as before: a
mismatch costs time, never correctness. numba checks its own side too: its version in
every index, the CPU name and features and the function's bytecode in every entry.

Knobs: ``NEARDUP_NUMBA_CPU=host`` compiles for this very CPU (fastest code, compiled once
per machine and kept in the cache: worth it for method=classic on a long-lived machine, see
docs/performance.md); a CPU name (``x86-64-v3``) compiles for that target (the build uses
it); ``NEARDUP_NUMBA_SHIPPED=0`` ignores the shipped code. A ``NUMBA_CPU_NAME`` of the
user's is left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
from functools import lru_cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from neardup.private_dir import NotPrivate, private_dir, warn_once

ENV = "NUMBA_CACHE_DIR"
CPU_ENV = "NEARDUP_NUMBA_CPU"
SHIPPED_ENV = "NEARDUP_NUMBA_SHIPPED"
SHIPPED = "_compiled"  # the folder of neardup/kernels that holds the shipped compiled code
MANIFEST = "manifest.json"
PACKAGE = "neardup.kernels"

# The x86-64 psABI micro-architecture levels as LLVM defines them: the host features each
# one's code may use (sse4.2 implies sse3, ssse3 and sse4.1; avx2 implies avx).
_V2 = ("cx16", "sahf", "popcnt", "sse4.2")
_V3 = (*_V2, "avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = (*_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
LEVELS: dict[str, tuple[str, ...]] = {"x86-64-v4": _V4, "x86-64-v3": _V3, "x86-64-v2": _V2, "generic": ()}
X86_64 = ("x86_64", "amd64")


def _package() -> Traversable:
    return resources.files(PACKAGE)


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """A digest of every module of this package, the compiled kernels' whole source (read
    through the package's loader: plain files and a zip alike)."""
    h = hashlib.sha256()
    for item in sorted((p for p in _package().iterdir() if p.name.endswith(".py")), key=lambda p: p.name):
        h.update(item.name.encode())
        h.update(item.read_bytes())
    return h.hexdigest()[:16]


def environment() -> dict[str, str]:
    """What compiled code depends on besides the sources (imports numba)."""
    import llvmlite
    import numba
    import numpy

    return {
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "numpy": ".".join(numpy.__version__.split(".")[:2]),
        "python": f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}{sys.abiflags}",
        "system": platform.system().lower(),
        "machine": platform.machine().lower(),
    }


@lru_cache(maxsize=1)
def cache_key() -> str:
    """The sources' digest and `environment()`, as one digest: the cache directory's name."""
    blob = json.dumps([sources_digest(), environment()], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _base() -> tuple[Path, tuple[str, ...]]:
    """Where the cache folder goes, as (anchor, the folders neardup names under it; see
    neardup.private_dir): NUMBA_CACHE_DIR if the user set one, else the user's cache
    directory's numba/."""
    user = os.environ.get(ENV)
    if user:
        return Path(user), ()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"), ("numba",)


def cache_dir() -> Path:
    """`<base>/neardup-<cache_key()>`."""
    anchor, levels = _base()
    return anchor.joinpath(*levels, f"neardup-{cache_key()}")


def fallback_base() -> tuple[Path, tuple[str, ...]]:
    """`<tmp>/neardup-numba-<uid>`, for a home that cannot be written (a container's)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()), (f"neardup-numba-{uid}",)


def usable_cache_dir() -> Path | None:
    """`cache_dir()`, or where it cannot be written (a container's read-only home) or fails
    the checks of neardup.private_dir (each such folder named once in a warning) the same
    name under `fallback_base()`; None when neither is usable: the kernels then compile in
    memory (jit.py), nothing is loaded from a disk cache and nothing shipped is placed."""
    name = f"neardup-{cache_key()}"
    for anchor, levels in (_base(), fallback_base()):
        try:
            path = private_dir(anchor, (*levels, name))
            tempfile.TemporaryFile(dir=path).close()  # numba writes its cache here
        except NotPrivate as e:
            warn_once(e, "the kernels' compiled code")
            continue
        except OSError:
            continue
        return path
    return None


def shipped() -> tuple[Traversable, dict[str, Any]] | None:
    """The shipped compiled code's folder and manifest, if there is one for `cache_key()`."""
    if os.environ.get(SHIPPED_ENV, "1") == "0":
        return None
    folder = _package() / SHIPPED
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, KeyError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("key") != cache_key():
        return None
    return folder, manifest


def runs_here(target: str) -> bool:
    """Whether this host runs code compiled for the LLVM CPU `target` (a psABI level)."""
    if target == "generic":
        return True
    needed = LEVELS.get(target)
    if needed is None or platform.machine().lower() not in X86_64:
        return False
    try:
        import llvmlite.binding as ll

        features = ll.get_host_cpu_features()
    except Exception:  # not every platform reports its features: only generic is sure
        return False
    return all(features.get(f, False) for f in needed)


def _codegen_started() -> bool:
    """Whether numba's CPU code generator exists already (its target is then fixed)."""
    from numba.core import registry

    return "_toplevel_target_context" in vars(registry.cpu_target)


def choose_target(targets: list[str]) -> str | None:
    """Set numba's CPU target (`NEARDUP_NUMBA_CPU`, or else the first of `targets` the host
    runs) and return it; None where the host's own CPU stays the target."""
    import numba

    wanted = os.environ.get(CPU_ENV, "auto")
    if wanted == "host" or os.environ.get("NUMBA_CPU_NAME") is not None or _codegen_started():
        return None
    if wanted == "auto":
        wanted = next((t for t in targets if runs_here(t)), "")
        if not wanted:
            return None
    config: Any = numba.config
    config.CPU_NAME = wanted
    config.CPU_FEATURES = ""  # the features of the CPU name, none of the host's
    return wanted


def seed(directory: Path, folder: Traversable, files: list[str]) -> bool:
    """Make the shipped files `directory`, unless it holds cache entries already. Written in
    a temporary directory beside it and renamed into place, so a process sees all of them or
    none (a concurrent process's directory wins). True if this call placed them."""
    if directory.is_dir() and any(directory.glob("*.nbi")):
        return False
    # mkdtemp: mode 0700 and a name no one else holds, in a folder that passed the checks.
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    placed = False
    try:
        for name in files:
            (tmp / name).write_bytes((folder / name).read_bytes())
        try:
            os.rename(tmp, directory)  # replaces the empty directory usable_cache_dir made
        except OSError:
            return False
        placed = True
        return True
    finally:
        if not placed:  # once renamed, the name is free again: never delete what took it since
            shutil.rmtree(tmp, ignore_errors=True)


def _locator(directory: Path, stamp: str) -> Any:
    from numba.core.caching import _CacheLocator

    class KernelsLocator(_CacheLocator):
        """Every kernel of this package: one directory, the cache key as source stamp."""

        def __init__(self, py_func: Any) -> None:
            self._lineno = py_func.__code__.co_firstlineno

        def get_cache_path(self) -> str:
            return str(directory)

        def get_source_stamp(self) -> str:
            return stamp

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> KernelsLocator | None:
            if not str(getattr(py_func, "__module__", "")).startswith(PACKAGE + "."):
                return None
            self = cls(py_func)
            try:
                self.ensure_cache_path()
            except OSError:
                return None
            return self

    return KernelsLocator


_installed: dict[str, Any] = {}


def install() -> dict[str, Any]:
    """Before the first kernel is defined (`neardup.kernels.jit`): the CPU target, the
    shipped code placed in the cache directory, the locator registered with numba. Once per
    process; returns what it did (`directory`, `target`, `seeded`), for tests and logs."""
    if _installed:
        return _installed
    from numba.core import caching

    found = shipped()
    directory = usable_cache_dir()
    # Without a cache folder the shipped code is not placed: compile for this host's CPU.
    target = choose_target(list(found[1].get("targets", [])) if found and directory is not None else [])
    placed = False
    if directory is not None and found is not None:
        try:
            placed = seed(directory, found[0], list(found[1].get("files", [])))
        except OSError:  # a cache that cannot be written is numba's compile, not an error
            placed = False
    if directory is not None:
        locator = _locator(directory, cache_key())
        caching.CacheImpl._locator_classes = [locator, *caching.CacheImpl._locator_classes]
    _installed.update(directory=directory, target=target, seeded=placed, shipped=found is not None)
    return _installed
