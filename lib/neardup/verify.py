"""Stage 4: verify candidate edges before clustering.

Unverified band collisions, chained by connected components, grow giant false
clusters; so every candidate pair is scored and dropped below verify.threshold.
`signature`: the MinHash estimate (the fraction of equal slots), which needs only
the two signatures; `exact`: the Jaccard of the two shingle sets, recomputed
from the normalized texts; `none`: every candidate is kept (similarity null).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup import columns as C
from neardup.sign import SignParams

_A, _B = "_a", "_b"


def _edge_schema(edges: DataFrame) -> T.StructType:
    fields = {f.name: f for f in edges.schema.fields}
    return T.StructType([fields[C.SRC], fields[C.DST], T.StructField(C.SIMILARITY, T.DoubleType(), False)])


def _signature_scorer(
    num_perm: int, threshold: float
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.minhash import estimate_jaccard
        from neardup.similarity import signature_matrix

        for batch in batches:
            sim = estimate_jaccard(
                signature_matrix(batch.column(_A), num_perm), signature_matrix(batch.column(_B), num_perm)
            )
            keep = pa.array(sim >= threshold)
            out = pa.RecordBatch.from_arrays(
                [batch.column(C.SRC), batch.column(C.DST), pa.array(sim, pa.float64())],
                names=[C.SRC, C.DST, C.SIMILARITY],
            )
            yield out.filter(keep)

    return score


def _exact_scorer(
    p: SignParams, threshold: float
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def score(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from neardup.hashing import shingle_hashes
        from neardup.similarity import exact_jaccard
        from neardup.textnorm import normalize

        for batch in batches:
            sets = []
            for name in (_A, _B):
                norm = normalize(
                    batch.column(name), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation
                )
                sets.append(shingle_hashes(norm, p.unit, p.ngram, p.char_ngram, p.seed))
            sim = exact_jaccard(sets[0][0], sets[0][1], sets[1][0], sets[1][1])
            out = pa.RecordBatch.from_arrays(
                [batch.column(C.SRC), batch.column(C.DST), pa.array(sim, pa.float64())],
                names=[C.SRC, C.DST, C.SIMILARITY],
            )
            yield out.filter(pa.array(np.asarray(sim >= threshold)))

    return score


def verify_pairs(
    candidates: DataFrame,
    signed: DataFrame,
    docs: DataFrame,
    params: SignParams,
    method: str,
    threshold: float,
    broadcast_ends: bool = True,
    cache: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """(src, dst) -> (src, dst, similarity: double) for pairs scoring >= threshold.

    `signed` is (_id, _sig) and is joined twice (two shuffles of the candidates and
    the signatures they need); `exact` joins the texts of `docs` (_id, _text) twice
    instead, after `cache` (the caller's persist, undone when it is done with it).
    """
    if method == "none":
        return candidates.select(C.SRC, C.DST, F.lit(None).cast("double").alias(C.SIMILARITY))
    if method == "signature":
        side, col = signed.select(C.DOC_ID, C.SIG), C.SIG
        scorer = _signature_scorer(params.num_perm, threshold)
    elif method == "exact":
        # Only the texts of candidate endpoints are shipped: the ids are (usually) few
        # enough to broadcast, so the rest of the corpus is dropped where it is read
        # instead of being shuffled for the joins.
        ends = candidates.select(F.col(C.SRC).alias(C.DOC_ID)).union(
            candidates.select(F.col(C.DST).alias(C.DOC_ID))
        )
        ends = ends.distinct()
        side = docs.join(F.broadcast(ends) if broadcast_ends else ends, C.DOC_ID, "left_semi")
        # Joined twice (as src and as dst) under different keys, which Spark cannot share:
        # cached and filled before the joins (whose shuffle stages may run side by side),
        # the corpus is scanned once, not twice.
        side = cache(side.select(C.DOC_ID, C.TEXT))
        side.count()
        col = C.TEXT
        scorer = _exact_scorer(params, threshold)
    else:  # pragma: no cover - config validation forbids it
        raise ValueError(method)
    pairs = (
        candidates.join(side.withColumnRenamed(C.DOC_ID, C.SRC).withColumnRenamed(col, _A), C.SRC)
        .join(side.withColumnRenamed(C.DOC_ID, C.DST).withColumnRenamed(col, _B), C.DST)
        .select(C.SRC, C.DST, _A, _B)
    )
    return pairs.mapInArrow(scorer, _edge_schema(candidates))
