"""Pure computation over numpy and Arrow: no pyspark here, so every kernel is unit-tested
in milliseconds without a JVM (tests/unit/test_layout.py checks the boundary).

The numba kernels cache their compiled code on disk. numba's cache notices an edit to the
module that defines a kernel but not to a module whose functions it calls, so a stale
cache would silently keep old code: the cache directory is therefore named after a digest
of every kernel source file (`numba_cache.py`), and any edit here starts a fresh one.
"""

from neardup.kernels import numba_cache

numba_cache.configure()
