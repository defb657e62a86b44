"""Every signed document's kept document, status, cluster size and similarity, on the
driver's arrays: what stages/membership.assign_members computes with two broadcast joins,
for a run whose driver holds the members (the exact stage's collect) and the guard's rows.
Pure numpy; rows are indices into the members.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup import columns as C

I64Array = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]
# The status codes `assign` returns, as indices into this tuple.
STATUSES = (C.STATUS_UNIQUE, C.STATUS_KEPT, C.STATUS_EXACT, C.STATUS_NEAR)


def assign(
    rep: npt.ArrayLike,
    chosen: npt.ArrayLike,
    chosen_kept: npt.ArrayLike,
    chosen_similarity: npt.ArrayLike,
    sized: npt.ArrayLike,
    sizes: npt.ArrayLike,
) -> tuple[I64Array, npt.NDArray[np.int8], I64Array, F64Array]:
    """rep: each member's representative's row; chosen: the rows of the representatives in
    a cluster, with their kept document's row (`chosen_kept`) and their similarity to it
    (`chosen_similarity`, NaN for null); sized: the rows of kept documents whose cluster
    holds more than themselves, with their `sizes` in documents
    -> per member: its kept document's row, its status (an index into `STATUSES`), its
    cluster's size and its similarity (NaN for null).

    A representative not chosen survives itself; each member takes its representative's
    kept document. An exact copy's similarity is its representative's, 1.0 when the
    representative is the kept document; a kept document's is null."""
    rep = np.asarray(rep, dtype=np.int64)
    n = len(rep)
    rows = np.arange(n, dtype=np.int64)
    kept_of = rows.copy()
    similarity_of = np.full(n, np.nan)
    chosen = np.asarray(chosen, dtype=np.int64)
    kept_of[chosen] = np.asarray(chosen_kept, dtype=np.int64)
    similarity_of[chosen] = np.asarray(chosen_similarity, dtype=np.float64)
    size_of = np.ones(n, dtype=np.int64)
    size_of[np.asarray(sized, dtype=np.int64)] = np.asarray(sizes, dtype=np.int64)

    kept = kept_of[rep]
    size = size_of[kept]
    is_kept = kept == rows
    status = np.where(is_kept, np.where(size > 1, 1, 0), np.where(rep != rows, 2, 3)).astype(np.int8)
    similarity = np.where(is_kept, np.nan, np.where(rep == kept, 1.0, similarity_of[rep]))
    return kept, status, size, similarity
