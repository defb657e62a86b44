"""YARN and HDFS for real, on Hadoop's own minicluster (yarn.py; the `minicluster` fixture,
one per test session): ./spark-submit.sh --master yarn in client and in cluster mode, with
hdfs:// input and output and Python shipped as the tier's venv-pack archive, against the
corpus's brute-force clusters; faults; the index on HDFS.

Two submits cover client mode, cluster mode and the faults: a client-mode run whose driver is
killed after stage candidates, and its rerun in cluster mode, which resumes from _work/ on HDFS
and loses an executor mid-verification. Its clusters/ are the brute-force ones, so both
deploy modes' work is in it.

The corpus is 600 generated documents in 4 Parquet files, not the shipped sample: on this
machine a submit of the sample took twice as long as these, and what the tests check does not
depend on the corpus's size. What needs no process of its own (the index's commands) runs in
this process, on a local session of the module. The packed environment goes onto HDFS once,
world-readable: YARN localizes a public resource once per node, not once per application,
and spark-submit uploads nothing it finds on the cluster's file system already.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest
from driver_ui import get_json, wait_for, wait_for_busy_executor
from short_jvm import C1_ONLY, SHORT_LIVED_JVM
from yarn import MiniCluster, cmdline, free_ports

from brute_force import Result, brute_force, read_result

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent

pytestmark = [pytest.mark.slow, pytest.mark.platform]

# The JVMs of a submit: client mode's driver and application master, cluster mode's driver
# (the application master), the executors.
JAVA_OPTIONS = (
    "spark.driver.extraJavaOptions",
    "spark.yarn.am.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)
# Two executors of one core: both busy while signing, so that killing one loses work. Spark's
# jars are on this machine already (local:), so no submit uploads its 460 MB of them; the
# shuffle settings are those the command line takes for a small local input (no test here is
# about partitioning); the JVMs compile with C1 only (short_jvm.SHORT_LIVED_JVM). Every process
# stays on the loopback address.
YARN_CONF = {
    "spark.executor.instances": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.yarn.am.memory": "256m",  # client mode's application master (cluster mode's: the driver)
    "spark.driver.memory": "1g",
    "spark.yarn.maxAppAttempts": "1",
    "spark.yarn.jars": f"local:{SPARK_HOME}/jars/*",
    "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": "127.0.0.1",
    "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    **{k: " ".join(SHORT_LIVED_JVM) for k in JAVA_OPTIONS},
}
# The interpreter of the packed environment, as spark-submit.sh names it (unpacked in each
# container's working directory).
SHIPPED_PYTHON = "./neardup_env/bin/python"
# report.html is tested elsewhere (tests/e2e/test_report_html.py); here it only costs time.
NO_HTML = ("--set", "report.html=false")


@dataclass(frozen=True)
class OnHdfs:
    """What the module's submits share."""

    cluster: MiniCluster
    env_archive: str  # the packed environment, hdfs://
    corpus: str  # the input, hdfs://
    want: Result  # the corpus's brute-force clusters


@pytest.fixture(scope="module")
def local_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local session in this process (what the command line's entry reuses), stopped with
    its JVM at the end of the module: the e2e tier keeps no JVM of its own."""
    from pyspark import SparkContext

    from neardup.runtime.session import jvm_process, start

    conf = {"spark.ui.enabled": "false", "spark.driver.memory": "1g"}
    spark = start("local[2]", conf, app_name="neardup-yarn-tests", small_input=True).spark
    try:
        yield spark
    finally:
        proc = jvm_process()
        spark.stop()
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            proc.kill()
            proc.wait()


def clusters_rows(path: Path) -> list[dict[str, Any]]:
    """clusters/ whole: every row and column, sorted by id."""
    return sorted(pq.read_table(path / "clusters").to_pylist(), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def on_hdfs(minicluster: MiniCluster, packed_env: Path, tmp_path_factory: pytest.TempPathFactory) -> OnHdfs:
    """The corpus and the packed environment on HDFS, and its brute-force clusters."""
    from neardup_testkit import synth

    root = tmp_path_factory.mktemp("yarn")
    corpus = root / "corpus"
    corpus.mkdir()
    table = synth.generate(synth.CorpusSpec(num_docs=600, seed=5))
    for i in range(4):  # four signing tasks: both executors get some
        pq.write_table(table.slice(i * 150, 150), corpus / f"part-{i}.parquet")
    minicluster.put(corpus, "/data/corpus")
    minicluster.put(packed_env, "/envs/neardup-env.tar.gz")
    return OnHdfs(
        minicluster,
        minicluster.url("/envs/neardup-env.tar.gz"),
        minicluster.url("/data/corpus"),
        brute_force(table["id"].to_pylist(), table["text"].to_pylist()),
    )


def submit_cmd(deploy_mode: str, *job: str, conf: Sequence[str] = ()) -> list[str]:
    cmd = [str(ROOT / "spark-submit.sh"), "--master", "yarn", "--deploy-mode", deploy_mode]
    for setting in (*(f"{k}={v}" for k, v in YARN_CONF.items()), *conf):
        cmd += ["--conf", setting]
    return [*cmd, "--", *job]


def submit_env(h: OnHdfs) -> dict[str, str]:
    """spark-submit's environment: the cluster's client settings, pyspark's own Python files
    from this machine (local:, as the jars), the packed environment to ship."""
    lib = SPARK_HOME / "python" / "lib"
    archives = ",".join(f"local:{p}" for p in sorted(lib.glob("*.zip")))
    return {
        **os.environ,
        **h.cluster.env(),
        "SPARK_HOME": str(SPARK_HOME),
        "PYTHON": sys.executable,
        "PYSPARK_ARCHIVES_PATH": archives,
        "NEARDUP_VENV_ARCHIVE": h.env_archive,
    }


def hdfs_clusters(cluster: MiniCluster, output: str, local: Path) -> list[dict[str, Any]]:
    """clusters/ of an output on HDFS (copied to `local`), whole and sorted by id."""
    return clusters_rows(cluster.get(f"{output}/clusters", local / "clusters").parent)


def submit(
    h: OnHdfs, deploy_mode: str, output: str, log: Path, conf: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """./spark-submit.sh --master yarn of `dedup` of the corpus to `output` (on HDFS), started,
    its output to `log`; in a session of its own, so that a client-mode driver dies whole
    (JVM and Python)."""
    job = ["dedup", "--input", h.corpus, "--output", h.cluster.url(output), *NO_HTML]
    with open(log, "wb") as sink:
        return subprocess.Popen(
            submit_cmd(deploy_mode, *job, conf=conf),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=submit_env(h),
            cwd=ROOT,
            start_new_session=True,
        )


def pythons(cluster: MiniCluster, seen: dict[str, set[str]]) -> dict[str, set[str]]:
    """What the cluster's Python processes run -> the interpreters they run it with, added to
    `seen`: the driver's `dedup.py` (cluster mode), the executors' `pyspark.daemon`."""
    for pid in cluster.processes():
        args = cmdline(pid)
        if len(args) > 1 and Path(args[0]).name.startswith("python"):
            role = "pyspark.daemon" if "pyspark.daemon" in args else Path(args[1]).name
            seen.setdefault(role, set()).add(args[0])
    return seen


def stop(proc: subprocess.Popen[bytes]) -> None:
    """A submit's whole session killed, if it still runs (a test that failed half way)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def finish(
    proc: subprocess.Popen[bytes],
    cluster: MiniCluster,
    log: Path,
    seen: dict[str, set[str]],
    timeout: float = 900,
) -> tuple[str, dict[str, set[str]]]:
    """Wait for a submit, noting the Python processes its containers run meanwhile; its output."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, f"the submit did not end within {timeout} s"
        pythons(cluster, seen)
        time.sleep(0.5)
    return log.read_text(errors="replace"), seen


# --- faults: a client-mode driver killed, the rerun in cluster mode with an executor killed --

FAULTS = "/out/faults"


@dataclass(frozen=True)
class KilledDriver:
    app: str  # its application
    output: str  # what it printed until then
    seconds: float


@pytest.fixture(scope="module")
def killed_client_driver(on_hdfs: OnHdfs, tmp_path_factory: pytest.TempPathFactory) -> KilledDriver:
    """A client-mode submit whose driver, its JVM and its Python together (the submit's
    session, as on a lost host), is killed with SIGKILL once stage candidates has finished."""
    h = on_hdfs
    log = tmp_path_factory.mktemp("killed") / "client.log"
    began, apps = time.monotonic(), h.cluster.applications()
    # No UI: in client mode YARN's proxy filter is added to the UI's handlers from another
    # thread while the driver starts them, and Spark 4.3's Jetty then fails the start now
    # and then (ConcurrentModificationException in ServletHandler.initialize, once in a CI
    # run on 2026-12-07). This test needs no UI; the cluster-mode rerun, which finds a busy
    # executor through it, starts its UI in the application master, with no such race.
    proc = submit(h, "client", FAULTS, log, conf=["spark.ui.enabled=false"])
    try:
        ended = lambda: "stage candidates" in log.read_text(errors="replace")  # noqa: E731
        wait_for("the end of stage candidates", ended, proc, log)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        stop(proc)
    (app,) = h.cluster.applications() - apps
    return KilledDriver(app, log.read_text(errors="replace"), time.monotonic() - began)


def test_a_killed_client_mode_driver_leaves_its_finished_stages_on_hdfs(
    on_hdfs: OnHdfs, killed_client_driver: KilledDriver
) -> None:
    """Nothing published; the finished stages' outputs in _work/ on HDFS; and the application
    ends with its driver: the application master sees it gone and no container of it is left
    running."""
    h, killed = on_hdfs, killed_client_driver
    assert " on yarn, " in killed.output, killed.output[-4000:]
    assert not h.cluster.exists(FAULTS)
    work = f"{FAULTS}.neardup-staging/_work"
    finished = sorted(
        name.split("-")[0] for name in h.cluster.list(work) if h.cluster.exists(f"{work}/{name}/_SUCCESS")
    )
    # The candidates stage writes the star edges too (stages/stars.py reads them).
    assert finished == ["candidates", "signatures", "star_edges"]
    deadline = time.monotonic() + 120
    while (left := h.cluster.app_processes(killed.app)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, [" ".join(cmdline(pid))[:200] for pid in left]
    print(f"client mode, killed after candidates: {killed.seconds:.1f} s")


def test_the_rerun_in_cluster_mode_resumes_them_through_a_killed_executor(
    on_hdfs: OnHdfs, killed_client_driver: KilledDriver, tmp_path: Path
) -> None:
    """The same command in cluster mode. It reuses the stages the killed driver finished (read
    from _work/ on HDFS). While verification's tasks run, an executor's JVM is killed with
    SIGKILL (the driver's REST API names a busy executor, its container's command line has
    the pid): YARN reports the container lost, Spark starts another and reruns what was lost.
    clusters/ are the brute-force ones. The driver runs in the application master's container, on
    the shipped environment's Python, as the executors."""
    h = on_hdfs
    ui, log = free_ports(1)[0], tmp_path / "cluster.log"
    began = time.monotonic()
    proc = submit(h, "cluster", FAULTS, log, conf=[f"spark.ui.port={ui}"])
    try:
        victim = wait_for_busy_executor(ui, "verify", proc, log)
        (app,) = (a["id"] for a in get_json(f"http://127.0.0.1:{ui}/api/v1/applications"))
        jvms = h.cluster.executor_jvms(app)
        assert victim in jvms, f"executor {victim} is not among the containers' JVMs {jvms}"
        pid, container = jvms[victim]
        seen = pythons(h.cluster, {})
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic() - began
        output, seen = finish(proc, h.cluster, log, seen)
    finally:
        stop(proc)
    driver = h.cluster.driver_log(app)
    assert proc.returncode == 0, (output + driver)[-4000:]
    assert re.search(rf"Lost executor {victim} on .*{container}", driver), driver[-4000:]
    assert "stage signatures reusing" in driver and "stage candidates reusing" in driver, driver[-4000:]
    report = json.loads(h.cluster.read(f"{FAULTS}/report.json"))
    assert sorted(report["resumed_stages"]) == ["candidates", "signatures", "star_edges"]
    assert seen.get("dedup.py") == {SHIPPED_PYTHON} and seen.get("pyspark.daemon") == {SHIPPED_PYTHON}, seen
    assert read_result(h.cluster.get(f"{FAULTS}/clusters", tmp_path / "clusters").parent) == h.want
    took = time.monotonic() - began
    print(f"cluster-mode rerun: {took:.1f} s; executor {victim} ({container}) killed at {killed_at:.1f} s")


# --- the index on HDFS ----------------------------------------------------------------------

INDEX = "/indexes/main"
Snapshot = tuple[int, list[str], set[tuple[int, int, int]]]


@dataclass(frozen=True)
class Batches:
    urls: list[str]  # three batches of one generated corpus on HDFS (clusters straddle them)
    ids: list[list[int]]
    text: dict[int, str]


@pytest.fixture(scope="module")
def batches(minicluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> Batches:
    from neardup_testkit.synth import CorpusSpec, generate

    table = generate(CorpusSpec(num_docs=600, seed=31, mean_chars=400, dup_fraction=0.5))
    root = tmp_path_factory.mktemp("batches")
    urls, ids = [], []
    for k in range(3):
        part = table.slice(k * 200, 200)
        pq.write_table(part, root / f"batch{k}.parquet")
        minicluster.put(root / f"batch{k}.parquet", f"/index-data/batch{k}/part-0.parquet")
        urls.append(minicluster.url(f"/index-data/batch{k}"))
        ids.append(part["id"].to_pylist())
    text = dict(zip(table["id"].to_pylist(), table["text"].to_pylist(), strict=True))
    return Batches(urls, ids, text)


def read_index(cluster: MiniCluster, path: str, local: Path) -> Snapshot:
    """(version, segments, every (id, band, key)) as docs/design.md says a reader finds them:
    the highest manifest on HDFS, and only the segments it lists (copied to `local`, read
    with pyarrow)."""
    names = sorted(n for n in cluster.list(f"{path}/_manifest") if re.fullmatch(r"v\d{8}\.json", n))
    manifest = json.loads(cluster.read(f"{path}/_manifest/{names[-1]}"))
    rows: set[tuple[int, int, int]] = set()
    for seg in manifest["segments"]:
        where = cluster.get(f"{path}/segments/{seg['name']}", local / f"{time.monotonic_ns()}")
        ids = {r["_n"]: r["_id"] for r in pq.read_table(where / "docs").to_pylist()}
        keys = pq.read_table(where / "keys").to_pylist()
        rows |= {(ids[r["_n"]], int(r["band"]), r["_band_key"]) for r in keys}
    return manifest["version"], [s["name"] for s in manifest["segments"]], rows


def kill_mid_write(cluster: MiniCluster, batch: str, log: Path) -> int:
    """`index add` as a process of its own (local mode, the index on HDFS), its whole process
    group (driver, JVM, Python workers) killed with SIGKILL as soon as the new segment's
    band keys are being written on HDFS; its exit status."""
    cmd = [sys.executable, "-m", "neardup", "index", "add", "--input", batch, "--index", cluster.url(INDEX)]
    # What the command line gives a small local input, which it cannot tell an hdfs:// one is.
    cmd += [
        "--master",
        "local[1]",
        "--conf",
        "spark.sql.shuffle.partitions=1",
        "--conf",
        "spark.ui.enabled=false",
    ]
    cmd += ["--conf", f"spark.driver.extraJavaOptions={C1_ONLY}"]
    segments = f"{INDEX}/segments"
    earlier = set(cluster.list(segments))  # a crashed add's segment, say

    def writing() -> bool:
        new = [n for n in cluster.list(segments) if n not in earlier and n.startswith("v00000002-")]
        return any("keys" in cluster.list(f"{segments}/{n}") for n in new)

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for("band keys written", writing, proc, log, every=0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=60)
    finally:
        stop(proc)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 9)


def test_the_index_on_hdfs(
    local_spark: Any,
    minicluster: MiniCluster,
    batches: Batches,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`index build`, `index add` and `dedup --against` with the index, the batches and the
    output on HDFS, with the guarantees of docs/index.md as tests/spark/test_index_cli.py
    checks them on local disk: an add that crashes before its commit, and one killed with
    SIGKILL mid-write (a process of its own, its files on HDFS left open), leave the index
    reading as before; a rerun commits the next version and deletes what they left; ids
    already indexed are refused (exit 3); `dedup --against` equals its plain-Python reference;
    an index of other parameters, and indexed texts rewritten since, are refused (exit 4)."""
    from inprocess import neardup
    from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash
    from neardup_testkit.reference import incremental_clusters

    c, b, began = minicluster, batches, time.monotonic()
    laps: list[str] = []

    def lap(what: str) -> None:
        laps.append(f"{what} {time.monotonic() - began:.0f} s")

    index = c.url(INDEX)
    built = neardup(capsys, "index", "build", "--input", b.urls[0], "--index", index)
    assert built.code == 0, built.err[-3000:]
    assert built.out.startswith(f"neardup: indexed 200 of 200 rows of {b.urls[0]}"), built.out
    lap("build")
    before = read_index(c, INDEX, tmp_path)
    assert before[0] == 1 and {r[0] for r in before[2]} == set(b.ids[0]) and len(before[2]) == 200 * 18

    # A crash between the segment's files and the commit (the stage hook raising where a
    # driver of its own would exit), then a real process killed mid-write.
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, "write")
        crashing.setenv(FAULT_HOW_ENV, "raise")
        with pytest.raises(InjectedCrash):
            neardup(capsys, "index", "add", "--input", b.urls[1], "--index", index)
    lap("crashed add")
    capsys.readouterr()
    assert read_index(c, INDEX, tmp_path) == before
    assert len(c.list(f"{INDEX}/segments")) == 2  # the unlisted segment, never read
    assert kill_mid_write(c, b.urls[1], tmp_path / "add.log") == -signal.SIGKILL
    lap("killed add")
    assert read_index(c, INDEX, tmp_path) == before
    assert len(c.list(f"{INDEX}/segments")) == 3

    # The rerun commits version 2 and deletes what the crashed ones left.
    rerun = neardup(capsys, "index", "add", "--input", b.urls[1], "--index", index)
    assert rerun.code == 0, rerun.err[-3000:]
    lap("rerun")
    version, segments, rows = read_index(c, INDEX, tmp_path)
    assert version == 2 and segments[0] == before[1][0] and len(segments) == 2
    assert {r[0] for r in rows} == set(b.ids[0]) | set(b.ids[1]) and len(rows) == 400 * 18
    assert sorted(c.list(f"{INDEX}/segments")) == sorted(segments)
    assert sorted(c.list(f"{INDEX}/_manifest")) == ["v00000001.json", "v00000002.json"]
    twice = neardup(capsys, "index", "add", "--input", b.urls[1], "--index", index)
    assert twice.code == 3 and "id(s) are already in index" in twice.err, twice.err[-3000:]
    assert read_index(c, INDEX, tmp_path) == (version, segments, rows)

    # The third batch against the index: its plain-Python reference, document for document.
    out = "/out/against"
    against = neardup(
        capsys, "dedup", "--input", b.urls[2], "--output", c.url(out), "--against", index, *NO_HTML
    )
    assert against.code == 0, against.err[-3000:]
    lap("against")
    indexed = b.ids[0] + b.ids[1]
    want = incremental_clusters(
        b.ids[2], [b.text[i] for i in b.ids[2]], indexed, [b.text[i] for i in indexed], 0.8, 0.7
    )
    got = hdfs_clusters(c, out, tmp_path / "against")
    assert {r["id"]: (r["cluster_id"], _round(r["similarity"])) for r in got} == {
        i: (kept, _round(s)) for i, (kept, s) in want.items()
    }
    matched = {i: kept for i, (kept, _) in want.items() if kept in set(indexed)}
    assert matched and {r["id"]: r["matched_index_id"] for r in got if r["matched_index_id"]} == matched
    report = json.loads(c.read(f"{out}/report.json"))
    assert report["counts"]["matched_index"] == len(matched)

    # Refusals, each one line and exit 4: other band parameters; an indexed file rewritten.
    banded = ("--set", "lsh.bands=20", "--set", "lsh.rows=6")
    other = neardup(
        capsys, "dedup", "--input", b.urls[2], "--output", c.url("/out/x"), "--against", index, *banded
    )
    errors = [line for line in other.err.splitlines() if line.startswith("neardup: error:")]
    assert other.code == 4 and errors == [
        f"neardup: error: index {index} was built with lsh.bands=18, this run has lsh.bands=20"
    ], other.err[-3000:]
    batch0 = tmp_path / "batch0.parquet"
    c.get("/index-data/batch0/part-0.parquet", batch0)
    c.put(batch0, "/index-data/batch0/part-0.parquet")  # the same bytes, a new modification time
    changed = neardup(
        capsys, "dedup", "--input", b.urls[2], "--output", c.url("/out/changed"), "--against", index
    )
    errors = [line for line in changed.err.splitlines() if line.startswith("neardup: error:")]
    assert changed.code == 4 and len(errors) == 1 and "changed since it was indexed" in errors[0], (
        changed.err[-3000:]
    )
    lap("refusals")
    print(f"index on HDFS: {time.monotonic() - began:.1f} s ({', '.join(laps)})")
