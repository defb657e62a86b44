"""Which GraphFrames package a JVM neardup launches is given (runtime/packages.py), decided
before the JVM starts: none where a jar on spark.jars or --jars holds GraphFrames (an
air-gapped cluster's copy), looked into with GraphFrames' real jars from ~/.m2; and the
version the package pins is the one its extra installs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from graphframes_env import graphframes_jars, need_graphframes
from neardup.runtime.packages import (
    GRAPHFRAMES_CLASS,
    GRAPHFRAMES_VERSION,
    graphframes_coordinate,
    packages_to_add,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def jars(tmp_path: Path) -> tuple[str, Path, Path]:
    """The coordinate, and copies of its core and graphx jars under names of a user's own."""
    coordinate = need_graphframes()
    core, graphx = graphframes_jars(coordinate)
    (tmp_path / "lib").mkdir()
    shutil.copyfile(core, tmp_path / "lib" / "gf.jar")
    shutil.copyfile(graphx, tmp_path / "lib" / "gf-graphx.jar")
    return coordinate, tmp_path / "lib" / "gf.jar", tmp_path / "lib" / "gf-graphx.jar"


def test_added_unless_a_given_jar_holds_it(
    jars: tuple[str, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinate, core, graphx = jars
    wanted = {coordinate: GRAPHFRAMES_CLASS}
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert packages_to_add(wanted, {}) == [coordinate]
    # The graphx jar alone does not hold GraphFrame; nor does a path with no file.
    assert packages_to_add(wanted, {"spark.jars": f"{graphx},{tmp_path}/missing.jar"}) == [coordinate]
    for given in (f"{graphx},{core}", f"file://{core}", f"{tmp_path}/lib/*.jar", f" {core} "):
        assert packages_to_add(wanted, {"spark.jars": given}) == [], given
    # --jars in the arguments pyspark's launcher passes to spark-submit.
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--master local[2] --jars {graphx},{core} pyspark-shell")
    assert packages_to_add(wanted, {}) == []


def test_a_remote_jar_is_known_by_maven_s_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jar Spark fetches itself (hdfs:, dbfs:, https:) cannot be looked into beforehand."""
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    coordinate = graphframes_coordinate("4.3.0", "2.13.18")
    wanted = {coordinate: GRAPHFRAMES_CLASS}
    named = f"hdfs://nn:8020/libs/graphframes-spark4_2.13-{GRAPHFRAMES_VERSION}.jar"
    assert packages_to_add(wanted, {"spark.jars": named}) == []
    assert packages_to_add(wanted, {"spark.jars": "dbfs:/libs/other-thing.jar"}) == [coordinate]


def test_the_extra_installs_the_jar_s_version() -> None:
    # The extra's line (tomllib is Python 3.11's; the package runs on 3.10 too).
    extra = re.search(r"^graphframes = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert extra is not None
    assert f'"graphframes-py=={GRAPHFRAMES_VERSION}"' in extra.group(1)
    coordinate = graphframes_coordinate("3.5.9", "2.12.18")
    assert coordinate == f"io.graphframes:graphframes-spark3_2.12:{GRAPHFRAMES_VERSION}"
