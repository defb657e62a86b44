"""numba's `njit` for the kernels, imported after `numba_cache.install()` has set up the
cache they compile into (and load the shipped compiled code from): every kernel module
takes `njit` from here, so no kernel is defined before that. Where install() found no
folder it may use (none writable, or none passing neardup.private_dir's checks), `cache`
is turned off: the kernels compile in memory, and numba's own cache locations (beside the
sources, NUMBA_CACHE_DIR, its user-wide folder) are never read either."""

from typing import Any

from neardup.kernels import numba_cache

CACHED = numba_cache.install()["directory"] is not None

from numba import njit as numba_njit  # noqa: E402


def njit(*args: Any, **kwargs: Any) -> Any:
    """numba's njit, with its disk cache only where install() found a folder for it."""
    if not CACHED:
        kwargs["cache"] = False
    return numba_njit(*args, **kwargs)


__all__ = ["njit"]
