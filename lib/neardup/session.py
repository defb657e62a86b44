"""The one place a SparkSession is made (or reused, under Databricks and tests)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

# Settings neardup relies on; a user's --conf still wins.
_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Signatures arrive as Arrow batches; smaller batches keep Python workers' memory flat
    # on long documents without costing throughput on short ones.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2048",
    "spark.ui.showConsoleProgress": "false",
}


def get_spark(master: str | None, conf: Mapping[str, str], app_name: str = "neardup") -> SparkSession:
    """Reuse the active session if there is one (Databricks, notebooks, tests), else build one.

    With no master and no `spark.master` anywhere, local mode with every core.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        for k, v in conf.items():
            with contextlib.suppress(Exception):  # static settings cannot change on a live session
                active.conf.set(k, v)
        return active
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in conf and "MASTER" not in os.environ and not _submitted():
        builder = builder.master("local[*]")
    for k, v in {**_DEFAULTS, **conf}.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def _submitted() -> bool:
    """True when launched by spark-submit, which already chose the master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_SUBMIT" in os.environ
