"""JVM options for the tier's clusters, whose JVMs live minutes and do little.

C1 only, as the command line starts a JVM for a small local input: on 2 cores a YARN submit
took half the CPU seconds with these (65 against 119), and the tiers run side by side, so
every CPU second a test spares shortens the suite."""

from __future__ import annotations

# The cluster's daemons (master, workers, Hadoop's minicluster) and YARN's containers: C1
# only and one GC thread.
SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# A standalone submit's driver and executors: C1 only, with Spark's own collector, because
# the memory tests' JVMs must hold what a user's do (executors of 1 GB with the default
# collector); the JIT's tier changes no heap.
C1_ONLY = "-XX:TieredStopAtLevel=1"


def submit_conf() -> list[str]:
    """--conf settings of a standalone submit: its driver and executors compile with C1 only."""
    return [f"spark.driver.extraJavaOptions={C1_ONLY}", f"spark.executor.extraJavaOptions={C1_ONLY}"]


def daemon_env() -> dict[str, str]:
    """The environment that gives spark-class's master and workers SHORT_LIVED_JVM."""
    return {"SPARK_DAEMON_JAVA_OPTS": " ".join(SHORT_LIVED_JVM)}
