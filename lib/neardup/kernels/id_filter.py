"""A compact, approximate set of ids: 32-bit fingerprints of their 64-bit hashes (Spark's
`xxhash64` of the id, so any id type: the top 32 bits, which Spark computes as
`shiftright(xxhash64(id), 32)` cast to int), sorted. It answers "may this id be in the set?":
never no for a member, yes for a non-member with probability about size / 2**32. Exact
verification uses it to drop, where they are read, the texts of documents that are no
candidate's end when the ends are too many to broadcast as a join (stages/verify.py); the
exact join after it removes the few that pass by chance.

Four bytes an id, against the 16-24 of the hash relation a broadcast join builds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U32Array = npt.NDArray[np.uint32]


def fingerprints(hashes: npt.ArrayLike) -> U32Array:
    """The top 32 bits of each 64-bit hash."""
    h = np.asarray(hashes, dtype=np.int64).view(np.uint64)
    return (h >> np.uint64(32)).astype(np.uint32)


def id_set(prints: npt.ArrayLike) -> bytes:
    """The set of ids with these fingerprints (int32 as Spark casts them, or uint32), as
    bytes to ship to tasks: distinct, sorted, little-endian."""
    p = np.asarray(prints)
    if p.dtype != np.uint32:
        p = p.astype(np.int64).astype(np.uint32)  # the low 32 bits: the same bit pattern
    return np.unique(p).astype("<u4").tobytes()


def may_contain(payload: bytes, hashes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """For each 64-bit hash: may its id be in the set `payload` (`id_set`) holds?"""
    members = np.frombuffer(payload, dtype="<u4")
    probe = fingerprints(hashes)
    if members.size == 0:
        return np.zeros(probe.shape, dtype=np.bool_)
    at = np.minimum(np.searchsorted(members, probe), members.size - 1)
    return np.asarray(members[at] == probe)
