"""YARN and HDFS for real, on Hadoop's own minicluster (yarn.py; the `minicluster` fixture,
one per test session): ./spark-submit.sh --master yarn in client and in cluster mode, with
hdfs:// input and output and Python shipped as the tier's venv-pack archive, against a local
run of the same corpus.

The corpus is 600 generated documents in 4 Parquet files, not the shipped sample: on this
machine the sample took 278 s on YARN, these 120 s, and what the tests check (the same
clusters/ as a local run) does not depend on the corpus's size. The local run and anything
else that needs no process of its own run in this process, on a local session of the module.
The packed environment goes onto HDFS once, world-readable: YARN localizes a public resource
once per node, not once per application, and spark-submit uploads nothing it finds on the
cluster's file system already.
"""

from __future__ import annotations

import os
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
from yarn import SHORT_LIVED_JVM, MiniCluster, cmdline

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
# about partitioning); the JVMs compile with C1 only (yarn.SHORT_LIVED_JVM). Every process
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
    local: list[dict[str, Any]]  # clusters/ of the local run, sorted by id


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


def run_cli(*args: str) -> int:
    """The command line's entry in this process (on the module's local session)."""
    from neardup.cli import main

    return main(list(args))


def clusters_rows(path: Path) -> list[dict[str, Any]]:
    """clusters/ whole: every row and column, sorted by id."""
    return sorted(pq.read_table(path / "clusters").to_pylist(), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def on_hdfs(
    minicluster: MiniCluster, packed_env: Path, local_spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> OnHdfs:
    """The corpus and the packed environment on HDFS, and the local run's clusters/."""
    from neardup_testkit import synth

    root = tmp_path_factory.mktemp("yarn")
    corpus = root / "corpus"
    corpus.mkdir()
    table = synth.generate(synth.CorpusSpec(num_docs=600, seed=5))
    for i in range(4):  # four signing tasks: both executors get some
        pq.write_table(table.slice(i * 150, 150), corpus / f"part-{i}.parquet")
    minicluster.put(corpus, "/data/corpus")
    minicluster.put(packed_env, "/envs/neardup-env.tar.gz")
    local = root / "local"
    assert run_cli("dedup", "--input", str(corpus), "--output", str(local), *NO_HTML) == 0
    return OnHdfs(
        minicluster,
        minicluster.url("/envs/neardup-env.tar.gz"),
        minicluster.url("/data/corpus"),
        clusters_rows(local),
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


def hdfs_clusters(h: OnHdfs, output: str, local: Path) -> list[dict[str, Any]]:
    """clusters/ of an output on HDFS (copied to `local`), whole and sorted by id."""
    return clusters_rows(h.cluster.get(f"{output}/clusters", local / "clusters").parent)


def submit(h: OnHdfs, deploy_mode: str, output: str, log: Path) -> subprocess.Popen[bytes]:
    """./spark-submit.sh --master yarn of `dedup` of the corpus to `output` (on HDFS), started,
    its output to `log`; in a session of its own, so that a client-mode driver dies whole
    (JVM and Python)."""
    job = ["dedup", "--input", h.corpus, "--output", h.cluster.url(output), *NO_HTML]
    with open(log, "wb") as sink:
        return subprocess.Popen(
            submit_cmd(deploy_mode, *job),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=submit_env(h),
            cwd=ROOT,
            start_new_session=True,
        )


def pythons(cluster: MiniCluster) -> dict[str, set[str]]:
    """What the cluster's Python processes run -> the interpreters they run it with: the
    driver's `dedup.py` (cluster mode), the executors' `pyspark.daemon`."""
    seen: dict[str, set[str]] = {}
    for pid in cluster.processes():
        args = cmdline(pid)
        if args and Path(args[0]).name.startswith("python"):
            role = (
                "pyspark.daemon" if "pyspark.daemon" in args else Path(args[1]).name if len(args) > 1 else ""
            )
            seen.setdefault(role, set()).add(args[0])
    return seen


def finish(
    proc: subprocess.Popen[bytes], cluster: MiniCluster, log: Path, timeout: float = 900
) -> tuple[str, dict[str, set[str]]]:
    """Wait for a submit, noting the Python processes its containers ran meanwhile; its output."""
    seen: dict[str, set[str]] = {}
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"the submit did not end within {timeout} s")
        for role, exes in pythons(cluster).items():
            seen.setdefault(role, set()).update(exes)
        time.sleep(0.5)
    return log.read_text(errors="replace"), seen


def test_client_mode_matches_local_mode(on_hdfs: OnHdfs, tmp_path: Path) -> None:
    """The driver here, the executors in YARN containers running the shipped environment's
    Python: hdfs:// in and out, and clusters/ equal to the local run's."""
    h = on_hdfs
    out = "/out/client"
    began = time.monotonic()
    log = tmp_path / "submit.log"
    proc = submit(h, "client", out, log)
    output, seen = finish(proc, h.cluster, log)
    assert proc.returncode == 0, output[-4000:]
    assert " on yarn, " in output and "stage check" in output, output[-4000:]
    assert seen.get("pyspark.daemon") == {SHIPPED_PYTHON}, seen
    assert h.cluster.exists(f"{out}/_SUCCESS")
    assert hdfs_clusters(h, out, tmp_path) == h.local
    print(f"client mode: {time.monotonic() - began:.1f} s")


def test_cluster_mode_matches_local_mode(on_hdfs: OnHdfs, tmp_path: Path) -> None:
    """The driver in the application master's container: its Python is the shipped
    environment's too (spark-submit.sh ships it there in cluster mode); clusters/ equal to
    the local run's."""
    h = on_hdfs
    out = "/out/cluster"
    began, apps = time.monotonic(), h.cluster.applications()
    log = tmp_path / "submit.log"
    proc = submit(h, "cluster", out, log)
    output, seen = finish(proc, h.cluster, log)
    (app,) = h.cluster.applications() - apps
    driver = h.cluster.driver_log(app)
    assert proc.returncode == 0, (output + driver)[-4000:]
    assert " on yarn, " in driver and "stage check" in driver, driver[-4000:]
    assert seen.get("dedup.py") == {SHIPPED_PYTHON} and seen.get("pyspark.daemon") == {SHIPPED_PYTHON}, seen
    assert h.cluster.exists(f"{out}/_SUCCESS")
    assert hdfs_clusters(h, out, tmp_path) == h.local
    print(f"cluster mode: {time.monotonic() - began:.1f} s")
