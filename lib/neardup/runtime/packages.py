"""Spark packages the job adds to the session by itself: GraphFrames, matching the running
Spark and Scala versions (its artifacts are per Spark major version and Scala binary
version), fetched at session start through `spark.jars.packages`, which looks in the local
Maven repository (~/.m2) before the network."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# One version for the jar and for graphframes-py (pyproject's `graphframes` extra pins the
# same). 0.11.0's "two_phase" (stages/components.py names it) agrees with breadth-first
# search on Spark 4.3 and 3.5 as 0.10.0's algorithm does, ran 2-3 times faster on both (a
# 120-node path with stars, local[2]), and writes its rounds' edges as Parquet where 0.10.0
# checkpointed them (graphframes issue #872: a lost checkpoint write gave wrong components).
GRAPHFRAMES_VERSION = "0.11.0"
GRAPHFRAMES_CLASS = "org.graphframes.GraphFrame"


def graphframes_coordinate(spark_version: str, scala_version: str, version: str = GRAPHFRAMES_VERSION) -> str:
    """io.graphframes:graphframes-spark<major>_<scala binary>:<version>, e.g. Spark 4.3.0 with
    Scala 2.13.18 -> io.graphframes:graphframes-spark4_2.13:0.11.0."""
    major = spark_version.split(".")[0]
    scala = ".".join(scala_version.split(".")[:2])
    if major not in ("3", "4") or scala not in ("2.12", "2.13"):
        raise ValueError(f"no GraphFrames package for Spark {spark_version} with Scala {scala_version}")
    return f"io.graphframes:graphframes-spark{major}_{scala}:{version}"


def installed_versions() -> tuple[str, str]:
    """(Spark, Scala) versions of the pyspark installed here, read before any JVM starts:
    pyspark's own version and the scala-library jar it ships."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    scala = next(
        (
            m.group(1)
            for p in jars.glob("scala-library-*.jar")
            if (m := re.match(r"scala-library-([\d.]+)\.jar", p.name))
        ),
        "2.13" if pyspark.__version__.startswith("4") else "2.12",
    )
    return pyspark.__version__, scala


def graphframes_package(explicit: str | None = None) -> str:
    """The GraphFrames coordinate to add: the user's, or the one matching the installed pyspark."""
    return explicit or graphframes_coordinate(*installed_versions())


def class_loads(spark: Any, name: str) -> bool:
    """True if the JVM class `name` loads in this session's driver. Never raises: a missing
    class, a Spark Connect session (no py4j gateway) or a dead JVM all mean False."""
    try:
        jvm: Any = spark.sparkContext._jvm
        # The context class loader is the one that sees jars added by --packages / --jars
        # (the system class loader does not); graphframes-py loads its classes the same way.
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
        return True
    except Exception:
        return False
