"""Shared fixtures: one local Spark session for the whole test session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Executors' Python must be this interpreter (the venv that has numba, pyarrow...).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def graphframes_in_m2() -> str | None:
    """The GraphFrames coordinate for this pyspark if its jar is in ~/.m2 (where `.ci/run`
    fetches it and spark.jars.packages looks first), else None."""
    from neardup.runtime.packages import graphframes_package

    coordinate = graphframes_package()
    group, artifact, version = coordinate.split(":")
    folder = Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version
    return coordinate if (folder / f"{artifact}-{version}.jar").is_file() else None


GRAPHFRAMES = graphframes_in_m2()
NO_GRAPHFRAMES = (
    "GraphFrames is not in ~/.m2 (.ci/run fetches it with mvn dependency:get; Maven did not "
    "serve it to this machine)"
)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from neardup.runtime.session import get_spark

    packages = {"spark.jars.packages": GRAPHFRAMES} if GRAPHFRAMES else {}
    session = get_spark(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            **packages,
        },
        app_name="neardup-tests",
    )
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()
