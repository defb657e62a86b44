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

pyspark's daemon writes its port on stdout, so nothing here may print there; loading that
fails leaves each worker to load what it calls, as without this module.
"""

from __future__ import annotations

import contextlib
import sys

# Imported by the driver's session module, so the kernels are imported in `preload` only.
MODULE = "neardup.runtime.pydaemon"


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
    preload()
    from pyspark import daemon

    daemon.manager()
