"""The one place a SparkSession is made (or reused, under Databricks and tests)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from pyspark.sql import SparkSession

# Settings neardup relies on; a user's --conf still wins.
_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Signatures arrive as Arrow batches; smaller batches keep Python workers' memory flat
    # on long documents without costing throughput on short ones.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2048",
    "spark.ui.showConsoleProgress": "false",
}


def get_spark(
    master: str | None, conf: Mapping[str, str], app_name: str = "neardup", quiet_jvm: bool = False
) -> SparkSession:
    """Reuse the active session if there is one (Databricks, notebooks, tests), else build one.

    With no master and no `spark.master` anywhere, local mode with every core.
    `quiet_jvm` points a JVM this call launches at neardup's log4j2 settings (errors only).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        for k, v in conf.items():
            with contextlib.suppress(Exception):  # static settings cannot change on a live session
                active.conf.set(k, v)
        return active
    builder = SparkSession.builder.appName(app_name)
    settings = dict(_DEFAULTS)
    if not master and "spark.master" not in conf and "MASTER" not in os.environ and not _submitted():
        master = "local[*]"
    java_options = []
    if master and master.startswith("local"):
        # 200 shuffle partitions (Spark's default, sized for clusters) make a small local
        # run several times slower; a few per core keep both cores busy.
        settings["spark.sql.shuffle.partitions"] = str(max(8, 4 * (os.cpu_count() or 2)))
        # The JVM launched here runs every task: the throughput collector costs 6 % less
        # CPU than the default G1 on the 1M-document benchmark (it holds more heap).
        java_options.append("-XX:+UseParallelGC")
    if master:
        builder = builder.master(master)
    log_conf = resources.files("neardup").joinpath("conf/log4j2.properties")
    if quiet_jvm and not _submitted() and isinstance(log_conf, Path) and log_conf.is_file():
        java_options.append(f"-Dlog4j2.configurationFile={log_conf.as_uri()}")
    if java_options and not _submitted():
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    for k, v in {**settings, **conf}.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def _submitted() -> bool:
    """True when launched by spark-submit, which already chose the master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "SPARK_SUBMIT" in os.environ
