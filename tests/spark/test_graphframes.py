"""GraphFrames' connected components against an independent breadth-first search and the
built-in backend, on the shared session (its jars resolved from ~/.m2 by
spark.jars.packages, tests/conftest.py), and a session started without them, in a process
of its own. Marked `compat` but for the long ids' run and the session without the jars: each
Spark line has jars of its own (Spark 3.5: Scala 2.12), and GraphFrames gets longs either way
(the stage numbers string ids), so the string ids' run covers both on Spark 3.5."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from test_components import Edge, bfs_components, edges_df, random_graph

from graphframes_env import GRAPHFRAMES, need_graphframes
from neardup import config
from neardup.columns import COMPONENT, DOC_ID
from neardup.commands.dedup import run
from neardup.runtime.packages import GRAPHFRAMES_CLASS, class_loads
from neardup.runtime.session import start
from neardup.stages.components import connected_components, graphframes_available

AQE = "spark.sql.adaptive.enabled"


def _graph(seed: int) -> list[tuple[int, int]]:
    """One graph of disjoint parts: two random graphs, and a long path with stars under
    shuffled (sparse, signed) ids. GraphFrames' rounds follow the component of the largest
    diameter, each round with a write of its edges, so one run of the parts together costs
    what the path alone does: a run of each part cost tens of seconds apiece."""
    rng = random.Random(seed)
    # A path of 600 took minutes; 120 is still far longer than any other component here.
    path = [(i, i + 1) for i in range(120)]
    stars = [(c * 1000, c * 1000 + k) for c in range(1, 30) for k in range(1, 40)]
    relabel = dict(zip(range(-1, 30_000), rng.sample(range(-(10**12), 10**12), 30_001), strict=True))
    shuffled = [(relabel[a], relabel[b]) for a, b in path + [(a % 30_000, b % 30_000) for a, b in stars]]
    parts = [random_graph(rng, 50, 40), random_graph(rng, 400, 350)]
    # Every part's ids lie within +-10**12: each random part moves to a range of its own.
    moved = [(a + k * 3 * 10**12, b + k * 3 * 10**12) for k, part in enumerate(parts, 1) for a, b in part]
    return shuffled + moved


def _persisted(spark: SparkSession) -> set[int]:
    """Ids of the RDDs the session holds persisted (a cached DataFrame's among them)."""
    return {int(i) for i in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


@contextlib.contextmanager
def _adaptive(spark: SparkSession) -> Iterator[None]:
    """Adaptive execution on, with shuffles of more partitions than the data needs, so it
    coalesces them: the condition of GraphFrames' wrong components (issues #428, #453). The
    shared session's small-input settings (AQE off, a partition per core) come back after."""
    saved = {k: spark.conf.get(k) for k in (AQE, "spark.sql.shuffle.partitions")}
    spark.conf.set(AQE, "true")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        yield
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)


@pytest.mark.parametrize(
    "id_type",
    [
        pytest.param(T.LongType(), id="long"),
        pytest.param(T.StringType(), id="string", marks=pytest.mark.compat),
    ],
)
def test_agrees_with_bfs_and_builtin_under_adaptive_execution_on_uncached_input(
    spark: SparkSession, id_type: T.DataType
) -> None:
    """A 120-node path, 29 stars and two random graphs under shuffled ids; as strings too,
    which GraphFrames numbers itself after a shuffle (with monotonically_increasing_id: a
    recomputed or coalesced partition renumbers its rows, the cause its tracker gives for
    #428 and #453). The input is a plan with a shuffle, neither cached nor checkpointed
    (#159), and the session runs adaptive execution: the stage must give the components all
    the same, put the session's setting back, and leave nothing of GraphFrames cached."""
    need_graphframes()
    assert graphframes_available(spark)
    edges: list[Edge] = list(_graph(11))
    if isinstance(id_type, T.StringType):
        # String order is not the numbers' order: the smallest id of a component changes.
        edges = [(f"n{a}", f"n{b}") for a, b in edges]
    want = bfs_components(edges)
    with _adaptive(spark):
        uncached = edges_df(spark, edges, id_type).repartition(6, "src")
        before = _persisted(spark)
        result, stats = connected_components(uncached, backend="graphframes")
        assert stats["backend"] == "graphframes"
        assert spark.conf.get(AQE) == "true", "the session's adaptive execution is back on"
        # GraphFrames returns its labels persisted; the stage unpersists them.
        assert _persisted(spark) == before
        assert result.schema[DOC_ID].dataType == id_type
        got = {r[DOC_ID]: r[COMPONENT] for r in result.collect()}
        builtin, _ = connected_components(uncached, backend="builtin")
        from_builtin = {r[DOC_ID]: r[COMPONENT] for r in builtin.collect()}
    assert len(got) == len(want)
    assert got == want
    assert got == from_builtin


# A session without GraphFrames' jars, in a process of its own: the shared one has them.
_WITHOUT_JARS = r"""
import json, sys, tempfile
from neardup.errors import UsageError
from neardup.runtime.session import start
from neardup.stages.components import connected_components, graphframes_available

spark = start("local[1]", {"spark.ui.enabled": "false", "spark.driver.memory": "1g"}, small_input=True).spark
spark.sparkContext.setCheckpointDir(tempfile.mkdtemp())
jvm = spark.sparkContext._jvm
edges = spark.createDataFrame([tuple(e) for e in json.loads(sys.argv[1])], "src long, dst long")
out = {
    "available": graphframes_available(spark),
    "packages": spark.sparkContext.getConf().get("spark.jars.packages", ""),
    "spark": spark.version,
    "scala": str(jvm.scala.util.Properties.versionNumberString()),
}
try:
    connected_components(edges, backend="graphframes")
except UsageError as e:
    out["error"] = str(e)
result, stats = connected_components(edges, backend="auto")
out["auto"] = stats["backend"]
out["labels"] = [[r[0], r[1]] for r in result.collect()]
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


def test_without_the_jars(tmp_path: Path) -> None:
    """In a session started without GraphFrames' jars: not available; the graphframes
    backend is a usage error that names the package for the running Spark and Scala (Spark
    4: graphframes-spark4_2.13, Spark 3.5: graphframes-spark3_2.12) and how to add it; `auto`
    labels with the built-in backend, as breadth-first search does."""
    edges = random_graph(random.Random(17), 30, 25) + [(10**13 + i, 10**13 + i + 1) for i in range(8)]
    out = tmp_path / "out.json"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_JARS, json.dumps(edges), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["available"] is False
    assert got["packages"] == ""
    scala = ".".join(got["scala"].split(".")[:2])
    coordinate = f"io.graphframes:graphframes-spark{got['spark'].split('.')[0]}_{scala}:"
    assert got["error"].startswith("components.backend=graphframes but the GraphFrames jar is not loaded")
    assert f"--packages {coordinate}" in got["error"]
    assert "--jars" in got["error"] and "components.backend=builtin" in got["error"]
    assert got["auto"] == "builtin"
    assert {a: b for a, b in got["labels"]} == bfs_components(edges)
    if GRAPHFRAMES is not None:  # the shared session's jars are this line's
        assert GRAPHFRAMES.startswith(coordinate)


@pytest.mark.compat
def test_shared_session_has_them(spark: SparkSession) -> None:
    """The shared session's jars come from ~/.m2 through spark.jars.packages, the graphx jar
    through the core jar's POM, as from Maven Central."""
    need_graphframes()
    assert graphframes_available(spark)
    assert class_loads(spark, "org.apache.spark.graphframes.graphx.Graph")


@pytest.mark.compat
def test_an_active_session_that_loads_it_is_not_told_of_the_package(spark: SparkSession) -> None:
    """A session started elsewhere (a notebook, Databricks with its library) cannot take a
    package; one whose JVM loads the package's class needs none, and nothing is reported as
    not applied for it. A package whose class does not load is."""
    need_graphframes()
    absent = "org.example:absent:1.0"
    # Not the coordinate the session was started with: its class loads all the same.
    elsewhere = "io.graphframes:graphframes-from-a-cluster-library:1.0"
    started = start(None, {}, packages={elsewhere: GRAPHFRAMES_CLASS, absent: "org.example.Absent"})
    assert started.reused and started.spark is spark
    assert started.not_applied == [absent]


def _bsd_licences(path: Path) -> None:
    """The sample's BSD licence files of Python distributions and their edited copies (112
    documents of real text): clusters that the over-merge guard splits and a star group."""
    sample = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl.gz"
    with gzip.open(sample, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    chosen = {
        r["id"]
        for r in rows
        if r["kind"] == "python-licence" and r["licence"] in ("BSD-3-Clause", "BSD", "BSD-2-Clause")
    }
    picked = [r for r in rows if r["id"] in chosen or (r["kind"] == "edited" and r["variant_of"] in chosen)]
    path.write_text("".join(json.dumps(r) + "\n" for r in picked))


def test_whole_job_gives_the_same_clusters_with_the_built_in_backend(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The job with components.backend=builtin (every labelling distributed: the components,
    the stars' relabelling, the guard's rounds) against the default run (on the driver), row
    for row; GraphFrames' whole run is tests/e2e/test_graphframes.py's, on the whole sample."""
    corpus = tmp_path / "bsd.jsonl"
    _bsd_licences(corpus)
    rows = {}
    for backend in ("auto", "builtin"):
        cfg = config.load(sets=["output.overwrite=true", f"components.backend={backend}"])
        result = run(spark, cfg, str(corpus), str(tmp_path / backend))
        assert result.report["components"]["backend"] == ("driver" if backend == "auto" else backend)
        # What makes the comparison worth its runs: the guard splits clusters, stars have rounds.
        assert result.report["guard"]["failing_per_round"][0] > 0
        assert result.report["stars"]["rounds"]
        rows[backend] = pq.read_table(tmp_path / backend / "clusters").to_pylist()
    assert rows["builtin"] == rows["auto"]
