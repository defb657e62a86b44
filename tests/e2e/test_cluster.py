"""A real standalone cluster on 127.0.0.1 (a master and two workers started with
spark-class), driven through ./spark-submit.sh: the brute-force clusters after executors
killed mid-run (a submit costs about a minute here); memory.

One cluster serves the module. Its workers' Python is a bare interpreter (no numpy,
pyarrow, numba or neardup): a run that ships no environment names this venv's Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest
from driver_ui import get_json, wait_for_busy_executor
from heavy import HeavyCorpus, check_clusters, long_documents_jsonl
from short_jvm import daemon_env, submit_conf
from yarn import free_ports

from brute_force import Result, brute_force, read_result
from neardup_testkit import synth
from neardup_testkit.skew import SkewSpec, skewed_batches

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent

pytestmark = [pytest.mark.slow, pytest.mark.platform]


@dataclass
class Cluster:
    url: str
    webui: int
    logs: Path
    workers: list[subprocess.Popen[bytes]]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def executor_jvms(self) -> dict[str, int]:
        """Executor id -> pid of its JVM: the descendants of the workers' processes, read from
        /proc (ps would cut a JVM's command line, whose class name comes after the classpath)."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        jvms, todo = {}, [w.pid for w in self.workers]
        while todo:
            pid = todo.pop()
            todo += children.get(pid, [])
            try:
                args = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and b"--executor-id" in args:
                jvms[args[args.index(b"--executor-id") + 1].decode()] = pid
        return jvms

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def start_cluster(logs: Path, worker_env: dict[str, str] | None = None) -> Cluster:
    """A master and two workers (1 core, 1500 MB each) on 127.0.0.1, both registered."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    env |= {"PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(logs / "work"), **daemon_env()}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    # Chosen together: one at a time, the kernel may hand out a port twice before anything
    # binds it (a worker's UI once took the master UI's port, so the master's moved and the
    # wait below polled the worker's).
    port, webui, *worker_uis = free_ports(4)
    url = f"spark://127.0.0.1:{port}"
    master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master += ["--port", str(port), "--webui-port", str(webui)]
    cluster = Cluster(url, webui, logs, [])
    cluster.procs.append(
        subprocess.Popen(master, env=env, stdout=open(logs / "master.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    )
    try:
        for i in range(2):
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
            worker += ["--cores", "1", "--memory", "1500m", "--webui-port", str(worker_uis[i])]
            w = subprocess.Popen(
                worker,
                env={**env, **(worker_env or {})},
                stdout=open(logs / f"worker{i}.log", "wb"),  # noqa: SIM115 - lives as long as the process
                stderr=subprocess.STDOUT,
            )
            cluster.workers.append(w)
            cluster.procs.append(w)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                state = get_json(f"http://127.0.0.1:{webui}/json/")
                if sum(w["state"] == "ALIVE" for w in state.get("workers", [])) == 2:
                    return cluster
            except (OSError, ValueError):  # not up yet; or, while it starts, an HTML page
                pass
            time.sleep(0.5)
        raise TimeoutError("the standalone workers did not register within 120 s")
    except BaseException:
        cluster.stop()
        raise


def _run(cmd: list[str], **kw: Any) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment's interpreter without numpy, pyarrow, numba or neardup."""
    bare = tmp_path_factory.mktemp("bare") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(bare)])
    probe = subprocess.run([str(bare / "bin" / "python"), "-c", "import numpy"], capture_output=True)
    assert probe.returncode != 0, "the bare interpreter must not have numpy"
    return bare / "bin" / "python"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, bare_python: Path) -> Iterator[Cluster]:
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    path = f"{bare_python.parent}{os.pathsep}{os.environ['PATH']}"
    workers = {"PYSPARK_PYTHON": str(bare_python), "PATH": path}
    c = start_cluster(tmp_path_factory.mktemp("cluster-logs"), workers)
    try:
        yield c
    finally:
        c.stop()


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": str(SPARK_HOME),
        "PYTHON": sys.executable,
        **extra,
    }


# The shuffle settings the command line takes for a small local input (a partition per task
# slot, adaptive execution off). With Spark's 200 partitions the sample takes 280 s on these
# two 1-core executors instead of 120 s, and no test here is about partitioning
# (tests/spark/test_determinism.py is). Its JVMs compile with C1 only (short_jvm.py).
SMALL_SHUFFLES = ("spark.sql.shuffle.partitions=2", "spark.sql.adaptive.enabled=false")


def _submit_cmd(
    cluster: Cluster,
    executor_memory: str,
    *dedup_args: str,
    python: str | None = None,
    conf: Sequence[str] = (),
) -> list[str]:
    cmd = [str(ROOT / "spark-submit.sh"), "--master", cluster.url]
    cmd += ["--conf", f"spark.executor.memory={executor_memory}"]
    for setting in (*SMALL_SHUFFLES, *submit_conf(), *conf):
        cmd += ["--conf", setting]
    if python is not None:
        cmd += ["--conf", f"spark.pyspark.python={python}"]
    return [*cmd, "--", "dedup", *dedup_args]


def submit(
    cluster: Cluster, executor_memory: str, *dedup_args: str, timeout: int = 1500, conf: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """./spark-submit.sh against `cluster` with executors of `executor_memory` (and `conf`)."""
    return subprocess.run(
        _submit_cmd(cluster, executor_memory, *dedup_args, python=sys.executable, conf=conf),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=ROOT,
    )


def test_heavy_tailed_corpus_on_executors_of_1g(
    cluster: Cluster, heavy_corpus: HeavyCorpus, tmp_path: Path
) -> None:
    """The ~95 MB heavy-tailed corpus (one document of 50 MB) through executors of 1 GB."""
    out = tmp_path / "out"
    # Components are the ground truth here: the guard only scores (as in test_memory.py).
    args = ["--input", str(heavy_corpus.path), "--output", str(out), "--set", "guard.enabled=false"]
    proc = submit(cluster, "1g", *args)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    check_clusters(out, heavy_corpus)


def test_executors_out_of_memory_name_the_stage_and_the_setting(cluster: Cluster, tmp_path: Path) -> None:
    """Executors too small for the documents: after Spark's retries, one line that names the
    stage and spark.executor.memory, exit code 1."""
    corpus = tmp_path / "long.jsonl"
    long_documents_jsonl(corpus, docs=2, words_each=25_000_000)  # ~150 MB each
    # Two attempts, not Spark's four: the error after the retries is what is tested.
    args = ["--input", str(corpus), "--output", str(tmp_path / "out")]
    proc = submit(cluster, "512m", *args, timeout=900, conf=["spark.task.maxFailures=2"])
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-4000:]
    errors = [line for line in output.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1, output[-4000:]
    assert re.match(
        r"neardup: error: Spark executors (ran out of memory|were lost)( \([^)]+\))? in stage \w+ .*"
        r"--conf spark\.executor\.memory=\d+g",
        errors[0],
    ), errors[0]
    assert not (tmp_path / "out").exists()


# --- faults -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fault_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """6,000 generated documents and a page copied into LSH buckets of more than
    lsh.all_pairs_up_to (as tests/spark/test_resume.py's: star edges too), in 8 files (8
    signing tasks, so both executors are busy when one is killed), and their brute-force
    result (which an undisturbed run gives)."""
    root = tmp_path_factory.mktemp("faults")
    corpus = root / "corpus"
    corpus.mkdir()
    base = synth.CorpusSpec(num_docs=6_000, seed=5)
    skew = SkewSpec(copies=80, clusters=2, cluster_size=12)
    table = pa.Table.from_batches(list(skewed_batches(base, skew))).select(["id", "text"])
    step = table.num_rows // 8 + 1
    for i in range(8):
        pq.write_table(table.slice(i * step, step), corpus / f"part-{i}.parquet")
    return corpus, brute_force(table["id"].to_pylist(), table["text"].to_pylist())


def test_killed_executors_change_nothing(
    cluster: Cluster, fault_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    """SIGKILL an executor JVM running signing tasks (the driver's REST API names a busy
    executor, its worker's process tree has the JVM), then one running the candidate shuffle's
    tasks: Spark reruns what it lost (the signing tasks, then the shuffle's map outputs) on
    the executors the workers start in their place, and clusters/ hold the brute-force result,
    as an undisturbed run's do.

    A killed driver and its rerun, and the packed environment shipped to executors that have
    only a bare Python, are tests/e2e/test_yarn.py's (on HDFS, in both deploy modes): each
    submit here costs a minute, and the packed environment's unpacking in every executor, the
    replacements too, a quarter of that."""
    corpus, want = fault_corpus
    out, ui = tmp_path / "out", free_ports(1)[0]
    args = ["--input", str(corpus), "--output", str(out), "--set", "report.html=false"]
    cmd = _submit_cmd(cluster, "1g", *args, python=sys.executable)
    disturbed = [cmd[0], "--conf", f"spark.ui.port={ui}", *cmd[1:]]
    started = time.monotonic()
    log = tmp_path / "driver.log"
    killed: list[tuple[str, float]] = []
    with open(log, "wb") as sink:
        driver = subprocess.Popen(
            disturbed, env=_env(), cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            for stage in ("sign", "candidates"):
                victim = wait_for_busy_executor(ui, stage, driver, log)
                jvms = cluster.executor_jvms()
                assert victim in jvms, f"executor {victim} is not among the workers' JVMs {jvms}"
                os.kill(jvms[victim], signal.SIGKILL)
                killed.append((f"executor {victim} in {stage}", time.monotonic() - started))
            driver.wait(timeout=900)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert driver.returncode == 0, text[-4000:]
    assert len(set(re.findall(r"Lost executor (\d+)", text))) == 2, text[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert report["stars"]["star_edges"] > 0  # the copied page's buckets: the stars stage
    assert read_result(out) == want
    print(f"killed: {killed}; the run took {time.monotonic() - started:.1f} s")
