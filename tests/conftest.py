"""Shared fixtures: one local Spark session for the whole test session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from graphframes_env import GRAPHFRAMES

# Executors' Python must be this interpreter (the venv that has numba, pyarrow...).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from neardup.runtime.session import get_spark

    packages = {"spark.jars.packages": GRAPHFRAMES} if GRAPHFRAMES else {}
    session = get_spark(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            # The UI's REST API lists jobs with their descriptions (test_job_groups.py);
            # port 0: any free one.
            "spark.ui.port": "0",
            "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            **packages,
        },
        app_name="neardup-tests",
    )
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()
