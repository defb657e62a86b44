"""numba's `njit` for the kernels, imported after `numba_cache.install()` has set up the
cache they compile into (and load the shipped compiled code from): every kernel module
takes `njit` from here, so no kernel is defined before that."""

from neardup.kernels import numba_cache

numba_cache.install()

from numba import njit  # noqa: E402

__all__ = ["njit"]
