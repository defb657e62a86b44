"""Stage of `neardup decontaminate`: write kept/, removed/, matches/ and rejected/ under the
staging directory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup import columns as C
from neardup.config import Config
from neardup.kernels.contamination import NGRAM, REF
from neardup.stages.decon_reference import REFERENCE_ID
from neardup.stages.write import rejected_rows

OUTPUTS = ("kept", "removed", "matches", "rejected")


@dataclass(frozen=True)
class Broadcasts:
    """Which small frames are broadcast to the joins against the input (each decided by
    `harness.broadcastable` on a bound of its rows)."""

    removed: bool  # the removed ids (removed/)
    dropped: bool  # the removed and rejected ids (kept/)
    rejected: bool  # the rejected ids with their reasons (rejected/)


def write_decontaminated(
    source: DataFrame,
    cfg: Config,
    found: DataFrame,
    reference_ids: DataFrame,
    staged: Mapping[str, str],
    options: Mapping[str, str],
    broadcasts: Broadcasts,
    malformed: DataFrame | None = None,
) -> None:
    """Write the four outputs to `staged[name]` with the Parquet writer `options`.

    found (_id, _ref, reason, similarity, ngram): `stages.decon_match.match_documents`;
    reference_ids (_ref, reference_id); source: the input rows, every column as read.

    - matches/: one row per (document, reference item, reason), sorted: id, reference_id,
      reason (near_duplicate or ngram), similarity, ngram;
    - removed/: the input rows of the documents in matches/, columns unchanged;
    - kept/: the other input rows that are not rejected, columns unchanged;
    - rejected/: as dedup writes it (stages/write.py `rejected_rows`).
    """
    id_col = cfg.input.id_col
    matched = found.filter(F.col(REF).isNotNull())
    rejected = found.filter(F.col(REF).isNull()).select(C.DOC_ID, C.REASON)
    matches = matched.join(F.broadcast(reference_ids), REF).select(
        F.col(C.DOC_ID).alias(C.ID), REFERENCE_ID, C.REASON, C.SIMILARITY, NGRAM
    )
    matches.orderBy(C.ID, REFERENCE_ID, C.REASON).write.mode("overwrite").options(**options).parquet(
        staged["matches"]
    )
    removed_ids = matched.select(F.col(C.DOC_ID).alias("_drop_id")).distinct()
    dropped = removed_ids.unionByName(rejected.select(F.col(C.DOC_ID).alias("_drop_id")))
    on_id = F.col(id_col) == F.col("_drop_id")
    removed = source.join(F.broadcast(removed_ids) if broadcasts.removed else removed_ids, on_id, "left_semi")
    removed.write.mode("overwrite").options(**options).parquet(staged["removed"])
    kept = source.join(F.broadcast(dropped) if broadcasts.dropped else dropped, on_id, "left_anti")
    kept.write.mode("overwrite").options(**options).parquet(staged["kept"])
    bad = rejected_rows(source, cfg, rejected, broadcasts.rejected, malformed)
    bad.write.mode("overwrite").options(**options).parquet(staged["rejected"])
