"""Ids held by the driver as numpy arrays, sorted, made distinct, looked up and tested for
membership at the same cost whatever their type.

Integer ids are numpy's own arrays and take numpy's kernels. String ids come from Arrow
as arrays of Python objects, where numpy compares two values by a call into Python: its
sorts and binary searches ran ten to a hundred times slower than on integers, and
`np.isin` compared every value with every other one (quadratic: 45 s of the survivors
stage for 88,000 clustered documents of a million). So strings take Arrow's C++ kernels
here: its sort (stable, by UTF-8 bytes, which is code point order: the order Python,
numpy and Spark give strings) and its hash tables for lookups. The results are the same
as numpy's, in the same order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

I64Array = npt.NDArray[np.int64]


def is_text(values: np.ndarray) -> bool:
    """Whether `values` are strings (or bytes): Python objects, or numpy's text types."""
    return values.dtype.kind in "OUSTV"


def _arrow(values: np.ndarray) -> pa.Array:
    # 64-bit offsets: a million long ids (paths, URLs) may pass 2 GiB.
    if values.dtype.kind in "SV" or (len(values) and isinstance(values[0], bytes)):
        return pa.array(values, pa.large_binary())
    return pa.array(values, pa.large_string())


def _numpy(values: pa.Array) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False)


def argsort(values: np.ndarray) -> I64Array:
    """`np.argsort(values, kind="stable")`."""
    if not is_text(values):
        return np.argsort(values, kind="stable").astype(np.int64, copy=False)
    return np.asarray(pc.sort_indices(_arrow(values)).to_numpy(), dtype=np.int64)


def unique(values: np.ndarray) -> tuple[np.ndarray, I64Array, I64Array]:
    """`np.unique(values, return_inverse=True, return_counts=True)`: the distinct values
    sorted, each value's place among them, and how many times each occurs."""
    if not is_text(values):
        found, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        return found, inverse.reshape(-1).astype(np.int64, copy=False), counts.astype(np.int64, copy=False)
    arrow = _arrow(values)
    distinct = pc.unique(arrow)
    distinct = distinct.take(pc.sort_indices(distinct))
    inverse = np.asarray(pc.index_in(arrow, value_set=distinct).to_numpy(), dtype=np.int64)
    counts = np.bincount(inverse, minlength=len(distinct)).astype(np.int64)
    return _numpy(distinct).astype(values.dtype, copy=False), inverse, counts


def first_index(inverse: I64Array, counts: I64Array) -> I64Array:
    """From `unique`'s inverse and counts: each distinct value's first place in the values
    (`np.unique`'s `return_index`)."""
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return np.asarray(order[starts], dtype=np.int64) if len(counts) else np.zeros(0, np.int64)


def lookup(held: np.ndarray, values: np.ndarray) -> I64Array:
    """Each of `values`' index in `held` (sorted and distinct), -1 where it is not one of
    them."""
    if not is_text(values) and not is_text(held):
        at = np.searchsorted(held, values)
        found = at < len(held)
        found[found] = held[at[found]] == values[found]
        return np.where(found, at, -1).astype(np.int64)
    if not len(values):
        return np.zeros(0, np.int64)
    got = pc.index_in(_arrow(values), value_set=_arrow(held))
    return np.asarray(got.fill_null(-1).to_numpy(), dtype=np.int64)


def isin(values: np.ndarray, among: np.ndarray) -> npt.NDArray[np.bool_]:
    """`np.isin(values, among)`."""
    if not is_text(values) and not is_text(among):
        return np.isin(values, among)
    if not len(values):
        return np.zeros(0, bool)
    return np.asarray(pc.is_in(_arrow(values), value_set=_arrow(among)).to_numpy(zero_copy_only=False), bool)
