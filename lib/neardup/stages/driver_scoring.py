"""Scoring pairs on the driver from texts collected once.

A stage that scores pairs round after round among a known set of documents (the further
stars' members, the guard's clustered documents) pays two or three Spark jobs a round for
exact verification: the texts routed to their groups, then scored. Where those documents'
texts fit a budget in bytes, `DriverScorer.collect` brings them to the driver in one job
(their bytes counted when they were signed, `Sizes`; two where they are not known, an
indexed document's: their bytes are summed first), and
every later round scores on the driver with the same kernel and the same grouping as
stages/verify.py (a group per source, its row first, then its destinations by id), so the
similarities are the same to the bit. Larger sets, and a document whose text is not found,
keep Spark's scoring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.kernels import id_arrays
from neardup.kernels.signatures import SignParams
from neardup.stages.driver_frames import collect_arrays, ids_frame

# UTF-8 bytes of text held on the driver at once: the collected texts, and a batch of the
# rows the kernel scores (a text repeats once per group it is in).
TEXT_BUDGET = 64 << 20
BATCH_BYTES = 16 << 20
# The rows of one scoring on the driver, in bytes: past this, two cores in Spark are faster
# than the driver's one thread, whatever the jobs cost (the caller scores in Spark).
SCORE_BYTES = 64 << 20
# More documents than this are not tried (their sizes are not even looked up): at 1 KB a
# document they would fill TEXT_BUDGET.
MAX_DOCS = TEXT_BUDGET >> 10


@dataclass(frozen=True)
class DriverScorer:
    """Texts of some documents on the driver (`ids` sorted, `texts[i]` the text of ids[i]),
    and the verification's parameters."""

    ids: np.ndarray
    texts: pa.Array
    params: SignParams

    @classmethod
    def collect(
        cls, docs: DataFrame, ids: np.ndarray, params: SignParams, size: int | None = None
    ) -> DriverScorer | None:
        """The texts of `ids` (distinct, of the frame's id type) from docs (_id, _text), or
        None where they exceed TEXT_BUDGET bytes: one job collects them. `size`, their UTF-8
        bytes where the caller knows them; otherwise one job sums them first."""
        if size is not None and size > TEXT_BUDGET:
            return None
        id_type = docs.schema[C.DOC_ID].dataType
        wanted = ids_frame(docs.sparkSession, ids, id_type)
        mine = docs.select(C.DOC_ID, C.TEXT).join(F.broadcast(wanted), C.DOC_ID)
        if size is None:
            row = mine.agg(F.sum(F.octet_length(C.TEXT)).alias("bytes")).first()
            if row is None or (row["bytes"] or 0) > TEXT_BUDGET:
                return None
        text = F.coalesce(F.col(C.TEXT), F.lit("")).alias(C.TEXT)
        got = collect_arrays(mine.select(C.DOC_ID, text), [C.DOC_ID, C.TEXT])
        if len(got[C.DOC_ID]) != len(ids):
            return None  # a text missing (or twice): Spark's scoring decides as it would
        order = id_arrays.argsort(got[C.DOC_ID])
        return cls(got[C.DOC_ID][order], pa.array(got[C.TEXT][order], pa.large_string()), params)

    def _codes(self, values: np.ndarray) -> np.ndarray:
        at = id_arrays.lookup(self.ids, values)
        if len(at) and at.min() < 0:
            raise KeyError("driver scoring: a pair's document was not collected")
        return at

    def score(self, src: np.ndarray, dst: np.ndarray, threshold: float) -> dict[str, np.ndarray] | None:
        """(src, dst) pairs of collected documents -> {src, dst, similarity} of those scoring
        at least `threshold`: exact Jaccard of their shingle sets, as verify_pairs scores;
        None where the rows to score exceed SCORE_BYTES."""
        from neardup.kernels.scoring import score_groups

        # Codes (places in the sorted ids) order as the ids do, and sort where strings cannot.
        a, b = self._codes(src), self._codes(dst)
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
        heads = np.flatnonzero(np.r_[True, a[1:] != a[:-1]]) if len(a) else np.zeros(0, np.int64)
        # Rows: each group's source, then its destinations (by id, as sorted above).
        n = len(a) + len(heads)
        is_head = np.zeros(n, bool)
        is_head[heads + np.arange(len(heads))] = True
        group, member = np.empty(n, np.int64), np.empty(n, np.int64)
        group[~is_head], member[~is_head] = a, b
        group[is_head], member[is_head] = a[heads], a[heads]
        sizes = pc.binary_length(self.texts.take(pa.array(member))).to_numpy(zero_copy_only=False)
        ends = np.cumsum(sizes)
        if len(ends) and ends[-1] > SCORE_BYTES:
            return None
        parts: list[pa.RecordBatch] = []
        start = 0
        while start < n:
            # BATCH_BYTES of rows, at least one; a group may run over batches (the kernel
            # carries its source's shingles).
            stop = max(
                start + 1, int(np.searchsorted(ends, ends[start] - sizes[start] + BATCH_BYTES, "right"))
            )
            rows = slice(start, stop)
            parts.append(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array(self.ids[group[rows]]),
                        pa.array(self.ids[member[rows]]),
                        self.texts.take(pa.array(member[rows])),
                    ],
                    names=[C.GROUP, C.DOC_ID, C.TEXT],
                )
            )
            start = stop
        out = list(score_groups(parts, self.params, threshold))
        if not out:
            return {C.SRC: self.ids[:0], C.DST: self.ids[:0], C.SIMILARITY: np.zeros(0)}
        table = pa.Table.from_batches(out)
        return {c: table.column(c).to_numpy() for c in (C.SRC, C.DST, C.SIMILARITY)}


# (src, dst) pairs -> {src, dst, similarity} of those at the caller's threshold, or None
# where the caller should score them in Spark.
PairScorer = Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray] | None]
# Ids -> a PairScorer from their texts on the driver, or None where the texts exceed the
# budget.
Prefetch = Callable[[np.ndarray], PairScorer | None]
# Ids -> the UTF-8 bytes of their texts, or None where one is not known.
Sizes = Callable[[np.ndarray], int | None]


def prefetcher(docs: DataFrame, params: SignParams, threshold: float, sizes: Sizes | None = None) -> Prefetch:
    """A `Prefetch` of texts from docs (_id, _text), scoring at `threshold`; `sizes`, where
    the caller has them, measure the texts before any is read (`HeldMembers.text_bytes`,
    `frame_sizes`)."""

    def prefetch(ids: np.ndarray) -> PairScorer | None:
        if len(ids) > MAX_DOCS:
            return None
        size = sizes(ids) if sizes is not None else None
        scorer = DriverScorer.collect(docs, ids, params, size)
        return None if scorer is None else partial(scorer.score, threshold=threshold)

    return prefetch


def frame_sizes(signed: DataFrame) -> Sizes:
    """`Sizes` from the signed rows (_id, _bytes): one job over two narrow columns, not the
    texts."""

    def sizes(ids: np.ndarray) -> int | None:
        id_type = signed.schema[C.DOC_ID].dataType
        wanted = ids_frame(signed.sparkSession, ids, id_type)
        row = (
            signed.select(C.DOC_ID, C.BYTES)
            .join(F.broadcast(wanted), C.DOC_ID)
            .agg(F.count(C.BYTES).alias("n"), F.sum(C.BYTES).alias("bytes"))
            .first()
        )
        if row is None or int(row["n"]) != len(ids):
            return None
        return int(row["bytes"] or 0)

    return sizes
