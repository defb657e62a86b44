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
# No class archive for the suite's JVMs (runtime/class_archive.py): its sessions and command
# lines run with half a dozen heaps and two Sparks, each a key of its own, whose archives
# would be built (half a minute of CPU each) and pruned in turn in the user's cache.
# tests/e2e/test_class_archive.py turns it on, with a folder of its own.
os.environ.setdefault("NEARDUP_CLASS_ARCHIVE", "0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tier's marker from the directory: `-m spark`, `-m e2e`, `-m "not e2e"`."""
    for item in items:
        tier = item.path.parent.name
        if tier in ("spark", "e2e"):
            item.add_marker(tier)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from neardup.runtime.session import start

    packages = {"spark.jars.packages": GRAPHFRAMES} if GRAPHFRAMES else {}
    # The command line's settings for a small local input (C1 only, adaptive execution off,
    # a shuffle partition per core): every corpus here is small, and they halve the Spark
    # jobs of a run (97 to 48 on the sample). Tests of other partitionings set them.
    session = start(
        "local[2]",
        {
            # The UI's REST API lists jobs with their descriptions (test_job_groups.py);
            # port 0: any free one.
            "spark.ui.port": "0",
            "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            # Expressions interpreted, not compiled to Java: every query here is over a few
            # thousand rows, and the compiling cost the JVM a third of its CPU on the sample
            # (43 s of CPU for a run compiled, 36 s interpreted; warm, 14-17 against 21-31).
            # Spark's contract is the same results either way; the command line's runs in
            # tests/e2e (the sample's on Spark 3.5 too) keep code generation.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            **packages,
        },
        app_name="neardup-tests",
        small_input=True,
    ).spark
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()
