"""The over-merge guard's nearest-kept step on the driver's arrays (stages/guard.py says why
the step exists): which (removed document, kept document) pairs it scores, and where each
removed document goes. The distributed step computes the same with joins and an
aggregation; this is its arithmetic, for a guard within the broadcast bound, where a dozen
Spark jobs over a few thousand rows cost more than the scoring itself.
"""

from __future__ import annotations

import numpy as np


def pairs_to_score(
    ids: np.ndarray,
    kept: np.ndarray,
    similarity: np.ndarray,
    origin: np.ndarray,
    below: float,
    up_to: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The guard's rows (a document, its kept document, its similarity to it, NaN for a
    kept one, and its kept document before the guard, `origin`) -> (row of a removed
    document, id of another kept document of its origin) for every removed document below
    `below` whose origin now holds 2 to `up_to` kept documents, against each of those but its
    own; grouped by row, in the order of the origin's kept rows."""
    is_kept = ids == kept
    kept_rows = np.flatnonzero(is_kept)
    by_origin = kept_rows[np.argsort(origin[kept_rows], kind="stable")]
    kept_origins = origin[by_origin]
    values, counts = np.unique(kept_origins, return_counts=True)
    split = values[(counts > 1) & (counts <= up_to)]
    # NaN (a kept document) compares False: only removed documents with a similarity.
    with np.errstate(invalid="ignore"):
        low = ~is_kept & (similarity < below)
    removed = np.flatnonzero(low)
    removed = removed[np.isin(origin[removed], split)]
    first = np.searchsorted(kept_origins, origin[removed], side="left")
    n = np.searchsorted(kept_origins, origin[removed], side="right") - first
    owner = np.repeat(removed, n)
    offset = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    near = ids[by_origin[np.repeat(first, n) + offset]]
    other = near != kept[owner]
    return owner[other], near[other]


def choose_nearest(
    doc: np.ndarray,
    kept: np.ndarray,
    similarity: np.ndarray,
    pair_doc: np.ndarray,
    pair_kept: np.ndarray,
    pair_similarity: np.ndarray,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each removed document `doc` with its current kept document and similarity, and the
    scored pairs (document, another kept document, similarity) -> the documents that move,
    their new kept document and similarity to it: the most similar, the current one given
    `margin`; then the current one; then the smallest kept id (the distributed step's order:
    a struct's minimum of (-(similarity + bonus), not current, kept id))."""
    cand_doc = np.concatenate([doc, pair_doc])
    cand_kept = np.concatenate([kept, pair_kept])
    cand_sim = np.concatenate([similarity, pair_similarity]).astype(np.float64)
    current = np.concatenate([np.ones(len(doc), bool), np.zeros(len(pair_doc), bool)])
    bonus = np.where(current, margin, 0.0)
    # Ids as ranks: their sort is numpy's (numbers) or Python's code-point order (strings),
    # Spark's order for both; object arrays do not lexsort.
    _, doc_rank = np.unique(cand_doc, return_inverse=True)
    _, kept_rank = np.unique(cand_kept, return_inverse=True)
    order = np.lexsort((kept_rank, ~current, -(cand_sim + bonus), doc_rank))
    firsts = order[np.r_[True, doc_rank[order][1:] != doc_rank[order][:-1]]] if len(order) else order
    moved = firsts[~current[firsts]]
    return cand_doc[moved], cand_kept[moved], cand_sim[moved]
