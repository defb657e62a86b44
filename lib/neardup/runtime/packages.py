"""Spark packages the job adds to the session by itself: GraphFrames, matching the running
Spark and Scala versions (its artifacts are per Spark major version and Scala binary
version), fetched at session start through `spark.jars.packages`, which looks in the local
Maven repository (~/.m2) before the network. Not added where GraphFrames is already there: a
jar of it on `spark.jars` (an air-gapped cluster's copy) or its class loading in a JVM
started elsewhere (runtime/session.py)."""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import itertools
import os
import re
import shlex
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from neardup.runtime.java import java_class

# One version for the jar and for graphframes-py (pyproject's `graphframes` extra pins the
# same). 0.11.0's "two_phase" (stages/components.py names it) agrees with breadth-first
# search on Spark 4.3 and 3.5 as 0.10.0's algorithm does, ran 2-3 times faster on both (a
# 120-node path with stars, local[2]), and writes its rounds' edges as Parquet where 0.10.0
# checkpointed them (graphframes issue #872: a lost checkpoint write gave wrong components).
GRAPHFRAMES_VERSION = "0.11.0"
GRAPHFRAMES_CLASS = "org.graphframes.GraphFrame"
GRAPHFRAMES_EXTRA = "pip install 'neardup[graphframes]'"


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


def graphframes_python_missing() -> str | None:
    """Why GraphFrames' Python package cannot be imported here, in one line, or None."""
    if importlib.util.find_spec("graphframes") is not None:
        return None
    return (
        f"components.backend=graphframes needs GraphFrames' Python package (graphframes-py "
        f"{GRAPHFRAMES_VERSION}), which is not installed: {GRAPHFRAMES_EXTRA}"
    )


def class_loads(spark: Any, name: str) -> bool:
    """True if the JVM class `name` loads in this session's driver. Never raises: a missing
    class, a Spark Connect session (no py4j gateway) or a dead JVM all mean False."""
    try:
        jvm: Any = spark.sparkContext._jvm
        # The context class loader is the one that sees jars added by --packages / --jars
        # (the system class loader does not); graphframes-py loads its classes the same way.
        loader = java_class(jvm, "java.lang.Thread").currentThread().getContextClassLoader()
        java_class(jvm, "java.lang.Class").forName(name, False, loader)
        return True
    except Exception:
        return False


def given_jars(conf: Mapping[str, str]) -> list[str]:
    """The jars a JVM launched with `conf` gets besides its packages: `spark.jars` and the
    `--jars` of PYSPARK_SUBMIT_ARGS (which pyspark's launcher passes to spark-submit)."""
    entries = (conf.get("spark.jars") or "").split(",")
    with contextlib.suppress(ValueError):  # unbalanced quotes: spark-submit will say so itself
        args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
        for flag, value in itertools.pairwise(args):
            if flag == "--jars":
                entries += value.split(",")
    return [e.strip() for e in entries if e.strip()]


def jars_hold(jars: list[str], class_name: str, artifact: str) -> bool:
    """True if one of `jars` (paths or URIs as spark.jars takes them, globs included) holds
    `class_name`. A local jar is opened and looked into; one Spark fetches from elsewhere
    (hdfs:, s3a:, dbfs:, https:) is taken by its name, Maven's `<artifact>-<version>.jar`."""
    entry = class_name.replace(".", "/") + ".class"
    for jar in jars:
        url = urlparse(jar)
        if url.scheme not in ("", "file", "local"):
            if Path(unquote(url.path)).name.startswith(artifact + "-"):
                return True
            continue
        for path in glob.glob(unquote(url.path) if url.scheme else jar):
            with contextlib.suppress(OSError, zipfile.BadZipFile), zipfile.ZipFile(path) as z:
                if entry in z.namelist():
                    return True
    return False


def artifact_of(coordinate: str) -> str:
    """group:artifact:version -> artifact."""
    parts = coordinate.split(":")
    return parts[1] if len(parts) >= 3 else coordinate


def packages_to_add(packages: Mapping[str, str], conf: Mapping[str, str]) -> list[str]:
    """The coordinates of `packages` (coordinate -> a class of it) a JVM launched with
    `conf` needs on spark.jars.packages: those no jar it is given already holds."""
    jars = given_jars(conf)
    return [p for p, cls in packages.items() if not jars_hold(jars, cls, artifact_of(p))]
