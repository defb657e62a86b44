"""Whether the GraphFrames jars for this pyspark are in ~/.m2, for tests that need them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def m2_folder(coordinate: str) -> Path:
    """~/.m2/repository/<group as folders>/<artifact>/<version>: where `.ci/graphframes-jars`
    installs an artifact and spark.jars.packages looks first."""
    group, artifact, version = coordinate.split(":")
    return Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version


def graphframes_in_m2() -> str | None:
    """The GraphFrames coordinate for this pyspark if its jars (the core and graphx ones) are
    in ~/.m2, else None."""
    from neardup.runtime.packages import graphframes_package

    coordinate = graphframes_package()
    return coordinate if all(p.is_file() for p in graphframes_jars(coordinate)) else None


def graphframes_jars(coordinate: str) -> list[Path]:
    """The core jar of `coordinate` and the graphx jar its POM depends on, in ~/.m2."""
    group, artifact, version = coordinate.split(":")
    graphx = artifact.replace("graphframes-", "graphframes-graphx-", 1)
    return [m2_folder(f"{group}:{a}:{version}") / f"{a}-{version}.jar" for a in (artifact, graphx)]


GRAPHFRAMES = graphframes_in_m2()
NO_GRAPHFRAMES = (
    "GraphFrames is not in ~/.m2 (.ci/graphframes-jars installs it; .ci/run sets "
    "NEARDUP_REQUIRE_GRAPHFRAMES, which makes this a failure instead)"
)


def need_graphframes() -> str:
    """The coordinate; skips the test without the jars, or fails it where CI installed them
    (NEARDUP_REQUIRE_GRAPHFRAMES): there a missing jar is a broken install, not a machine
    without GraphFrames."""
    if GRAPHFRAMES is None:
        if os.environ.get("NEARDUP_REQUIRE_GRAPHFRAMES"):
            pytest.fail(NO_GRAPHFRAMES)
        print(NO_GRAPHFRAMES)
        pytest.skip(NO_GRAPHFRAMES)
    return GRAPHFRAMES
