"""Pure computation over numpy and Arrow: no pyspark here, so every kernel is unit-tested
in milliseconds without a JVM (tests/unit/test_layout.py checks the boundary).

The numba kernels cache their compiled code on disk, in a directory named after a digest of
every kernel source and of the numba, llvmlite, numpy and Python they run on (numba's own
cache notices an edit to the module that defines a kernel but not to a module whose
functions it calls). The wheel ships that code compiled for portable CPU targets, placed
in the cache on first use where everything matches, so a new machine or executor does not
compile (`numba_cache.py`; the kernels get `njit` from `jit.py`, which sets this up first).
"""
