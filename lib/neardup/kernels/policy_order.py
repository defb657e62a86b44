"""The survivor policy's order in one process: Arrow's sort where Spark's order is the same.

For the key types the driver takes (integers and strings: strings by their UTF-8 bytes,
nulls last), Arrow's `sort_indices` orders rows as the Spark stages' windows and
`survivor_order.ascending` structs do; every policy's keys end with the id, so there are
no ties. The exact copies' representatives (kernels/exact_reps.py), the survivors of
components and the guard's ranking on the driver are all this one sort.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from neardup.kernels.policy import SortKey

I64Array = npt.NDArray[np.int64]
_GROUP = "_group"


def best_first(order: pa.Table, keys: Sequence[SortKey]) -> I64Array:
    """The rows of `order` (its `keys` columns) best first by the policy."""
    sort_keys = [(k.column, "descending" if k.descending else "ascending") for k in keys]
    # Nulls go last by default (sort_indices' null_placement, per key from pyarrow 25).
    return np.asarray(pc.sort_indices(order, sort_keys=sort_keys).to_numpy(), dtype=np.int64)


def best_of_groups(groups: npt.ArrayLike, order: pa.Table, keys: Sequence[SortKey]) -> I64Array:
    """For each row, the row of its group's best (`groups`: a number per row of `order`)."""
    groups = np.asarray(groups, dtype=np.int64)
    n = len(groups)
    if order.num_rows != n:
        raise ValueError(f"{n} group numbers for {order.num_rows} rows")
    best = np.arange(n, dtype=np.int64)
    if n < 2:
        return best
    table = order.append_column(_GROUP, pa.array(groups))
    ranked = best_first(table, [SortKey(_GROUP, False), *keys])
    ranked_group = groups[ranked]
    first = np.concatenate(([True], ranked_group[1:] != ranked_group[:-1]))
    leaders = ranked[first]
    best[ranked] = np.repeat(leaders, np.diff(np.append(np.flatnonzero(first), n)))
    return best


class HeldOrder:
    """The policy's key columns of a set of documents, held by the driver and looked up by
    id (the last key's column): a sort of integer ids, Arrow's hash lookup of strings."""

    def __init__(self, table: pa.Table, keys: Sequence[SortKey]) -> None:
        self.keys = tuple(keys)
        self.table = table.select([k.column for k in self.keys]).combine_chunks()
        ids = self.table.column(self.keys[-1].column).combine_chunks()
        self._integers = pa.types.is_integer(ids.type)
        if self._integers:
            values = ids.to_numpy()
            self._by_id = np.argsort(values, kind="stable")
            self._sorted = values[self._by_id]
        else:
            self._ids = ids

    def rows(self, ids: np.ndarray) -> I64Array:
        """The rows of `ids`; each must be held."""
        if self._integers:
            place = np.minimum(np.searchsorted(self._sorted, ids), max(len(self._sorted) - 1, 0))
            found = self._sorted[place] == ids if len(self._sorted) else np.zeros(len(ids), bool)
            rows = self._by_id[place] if len(self._sorted) else place
        else:
            at = pc.index_in(pa.array(ids, self._ids.type), value_set=self._ids)
            found = at.is_valid().to_numpy(zero_copy_only=False)
            rows = at.fill_null(0).to_numpy().astype(np.int64)
        if not found.all():
            raise ValueError(f"{int((~found).sum())} of {len(ids)} ids not held, such as {ids[~found][0]!r}")
        return np.asarray(rows, dtype=np.int64)

    def best_first(self, ids: np.ndarray) -> np.ndarray:
        """`ids` in the policy's order, best first."""
        return ids[best_first(self.table.take(pa.array(self.rows(ids))), self.keys)]

    def best_of_groups(self, ids: np.ndarray, groups: npt.ArrayLike) -> np.ndarray:
        """For each of `ids`, the best id of its group (`groups`: a number per id)."""
        return ids[best_of_groups(groups, self.table.take(pa.array(self.rows(ids))), self.keys)]
