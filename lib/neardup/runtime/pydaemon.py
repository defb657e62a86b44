"""The Python daemon of a local run's Spark (`spark.python.daemon.module`): it loads the
kernels' compiled code once, then forks the workers as pyspark's own daemon does, so that
every worker starts with that code loaded instead of loading it itself. A worker's first
call paid 2.0-2.4 s of CPU for it (numba's start, 0.7 s of which is numba importing
scipy.linalg for its BLAS check, then the kernels' code), once per worker; now once per
session (docs/performance.md).

Set only where neardup launches a local JVM itself (runtime/session.py): the workers' Python
is then the one the driver runs on, which imports neardup. On a cluster the package reaches
the executors with the tasks (spark-submit.sh's --py-files), after their daemon started, so
pyspark's own daemon stays there.

The daemon and its workers import nothing from the folder the run was started in
(`SAFE_PATH`); the kernels' compiled code they load comes from a folder only this user can
write to (kernels/numba_cache.py, neardup/private_dir.py), else they compile in memory.

pyspark's daemon writes its port on stdout, so nothing here may print there; loading that
fails leaves each worker to load what it calls, as without this module.

Spark puts its own copies of pyspark and py4j first on the workers' PYTHONPATH, as zips
(SPARK_HOME/python/lib). A zip holds no bytecode, so every daemon compiled pyspark's modules
from source, and a task that changed sys.path made every worker read the zips' directories
again (importlib.invalidate_caches): 1-2 s of CPU a run. Where the zips are those of the
installed pyspark package itself (pip's, SPARK_HOME inside it), they are taken off the path
and the same modules import from the package, from its cached bytecode.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
from pathlib import Path

# Imported by the driver's session module, so the kernels are imported in `preload` only.
MODULE = "neardup.runtime.pydaemon"
# Spark starts the daemon as `python -m MODULE` in the JVM's working directory, the one the
# user ran neardup in, and `-m` puts that directory first on the path: a `neardup/`, `numpy/`
# or `pyspark/` someone left there (a shared folder, /tmp) would be imported in place of the
# installed one, and run as the user in every worker. PYTHONSAFEPATH (Python 3.11+) leaves it
# off; the workers import only installed packages and what Spark puts on PYTHONPATH.
SAFE_PATH = "spark.executorEnv.PYTHONSAFEPATH"


def without_spark_zips(path: list[str]) -> list[str]:
    """`path` without the zips that hold the same pyspark and py4j as the package installed
    on the rest of it (zips inside that package's directory), when both import from there."""
    rest = [p for p in path if not p.endswith(".zip")]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if spec is None or not spec.submodule_search_locations:
        return path
    if importlib.machinery.PathFinder.find_spec("py4j", rest) is None:
        return path
    package = Path(next(iter(spec.submodule_search_locations))).resolve()
    return [p for p in path if not (p.endswith(".zip") and Path(p).resolve().is_relative_to(package))]


def preload() -> None:
    """Load signing's and exact verification's compiled code in this process; stdout kept
    clean (anything printed goes to stderr, which Spark logs)."""
    with contextlib.suppress(Exception), contextlib.redirect_stdout(sys.stderr):
        from neardup.kernels.loading import load_kernels
        from neardup.kernels.signatures import SignParams

        # Any valid parameters (lowercase, no punctuation stripped, word 5-grams, 128 slots of
        # one-permutation hashing, 16 bands of 8): the code loaded depends on the arguments'
        # types, not on these values.
        params = SignParams(True, False, "word", 5, 5, 128, 1, "oph", 16, 8)
        load_kernels(params, keep_signatures=False, exact=True)


if __name__ == "__main__":
    sys.path[:] = without_spark_zips(sys.path)
    preload()
    from pyspark import daemon

    daemon.manager()
