"""Whether the GraphFrames jar for this pyspark is in ~/.m2, for tests that need it."""

from __future__ import annotations

from pathlib import Path


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
