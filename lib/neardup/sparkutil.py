"""Small helpers shared by the Spark stages."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from neardup.config import Config
from neardup.policy import survivor_order


def survivor_columns(cfg: Config) -> list[Column]:
    """The survivor policy as Spark sort columns, best first, nulls last."""
    out = []
    for key in survivor_order(cfg.survivor.policy, bool(cfg.survivor.column)):
        col = F.col(key.column)
        out.append(col.desc_nulls_last() if key.descending else col.asc_nulls_last())
    return out
