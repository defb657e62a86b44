"""Scoring candidate edges, batch by batch: exact Jaccard per group of edges, or the
signature estimate per edge.

Exact: rows are (_group, _id, _text), clustered by group, where a group is one edge source
and the destinations of its edges, the source's row first, then the destinations by id
(a candidate's source is its smaller end; a pair the over-merge guard scores starts from
the kept document, whatever its id). Each text is normalized and shingled once per batch. A group may
run over many batches (a star of a large bucket): only its head's shingle set is carried
from one batch to the next, never the group's texts, so memory stays one batch.

A large group may also be spread over tasks in parts (stages/verify.py), each part with its
own copy of the source's row: each task scores its parts' members against that copy. Parts
that land in one task sort together as one group whose source row repeats; a repeated
source row is a head like the first, never a member, so every edge comes out once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.arrow import run_starts, text_buffers
from neardup.kernels.hashing import MASK64, check_shingle_args, shingle_keys
from neardup.kernels.head_jaccard import jaccard_to_heads
from neardup.kernels.minhash import estimate_jaccard
from neardup.kernels.signatures import SignParams
from neardup.kernels.similarity import signature_matrix
from neardup.kernels.textnorm import normalize

_NONE = np.empty(0, dtype=np.uint64)


class GroupOrderError(RuntimeError):
    """Rows of a group arrived without its source first: the input was not sorted."""


def _edges(src: pa.Array, dst: pa.Array, sim: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [src, dst, pa.array(sim, pa.float64())], names=[C.SRC, C.DST, C.SIMILARITY]
    )


def score_groups(
    batches: Iterable[pa.RecordBatch], p: SignParams, threshold: float
) -> Iterator[pa.RecordBatch]:
    """(_group, _id, _text) batches -> (src, dst, similarity) of the edges scoring >= threshold."""
    carried: tuple[pa.Scalar, np.ndarray] | None = None  # (source, shingle hashes) of the open group
    word_mode = check_shingle_args(p.unit, p.ngram, p.char_ngram)
    keys = shingle_keys(p.seed & MASK64)
    for batch in batches:
        n = len(batch)
        if n == 0:
            continue
        groups, ids = batch.column(C.GROUP), batch.column(C.DOC_ID)
        norm = normalize(batch.column(C.TEXT), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation)
        is_head = np.asarray(pc.equal(groups, ids))
        starts = run_starts(groups)
        heads = starts.copy()  # the row of each run's head; row n stands for the carried set
        held = _NONE
        if not is_head[0]:
            if carried is None or carried[0] != groups[0]:
                raise GroupOrderError("verify: a group's rows arrived without its source first")
            heads[0] = n
            held = carried[1]
        if not is_head[starts[1:]].all():
            raise GroupOrderError("verify: a group's rows arrived without its source first")
        head_of = np.repeat(heads, np.diff(np.append(starts, n)))
        members = np.flatnonzero(~is_head)
        text_starts, text_ends, data = text_buffers(norm)
        sim, tail = jaccard_to_heads(
            text_starts, text_ends, data, word_mode, p.ngram, p.char_ngram, keys, head_of, members, held
        )
        carried = (groups[n - 1], tail)
        keep = sim >= threshold
        take = pa.array(members[keep])
        yield _edges(groups.take(take), ids.take(take), sim[keep])


def score_signature_pairs(batch: pa.RecordBatch, num_perm: int, threshold: float) -> pa.RecordBatch:
    """(src, dst, _sig_a, _sig_b) -> (src, dst, similarity) of the edges whose estimated
    Jaccard (the fraction of equal slots) is >= threshold."""
    sim = estimate_jaccard(
        signature_matrix(batch.column(C.SIG_A), num_perm), signature_matrix(batch.column(C.SIG_B), num_perm)
    )
    keep = pa.array(sim >= threshold)
    return _edges(batch.column(C.SRC), batch.column(C.DST), sim).filter(keep)
