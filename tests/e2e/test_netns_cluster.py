"""A standalone cluster whose hosts are real network namespaces (tests/e2e/netns.py): the
master and each worker in a namespace of its own behind one bridge, the driver
(./spark-submit.sh) on this machine's side of it. Nothing reaches anything through a
shared loopback, so every address a process advertises must be one the others can reach.
The job, on the tier's hundred generated documents (any input shuffles between the two
executors), must give the brute-force clusters."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from cli_process import ROOT
from netns import Host, Network, unsupported
from short_jvm import daemon_env, submit_conf

from brute_force import Result, read_result

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_PORT, MASTER_UI, WORKER_UI = 7077, 8080, 8081  # each namespace has all ports to itself
WORKERS = 2
# A driver its executors cannot reach never fails by itself (they are relaunched again and
# again). The test stops at the first executor that says so; this ends any other hang, far
# above a run's one to three minutes on two cores shared with other work.
JOB_DEADLINE = 480

pytestmark = [pytest.mark.slow, pytest.mark.platform]

# Urls of the namespaces' web UIs must not go through a proxy the environment names.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get_json(url: str) -> Any:
    with _direct.open(url, timeout=5) as r:
        return json.loads(r.read())


def _tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log, stack frames left out."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join([line for line in text.splitlines() if not line.startswith("\tat ")][-lines:])


@dataclass
class Cluster:
    net: Network
    master: Host
    workers: list[Host]
    logs: Path

    @property
    def url(self) -> str:
        return f"spark://{self.master.ip}:{MASTER_PORT}"

    def worker_dir(self, i: int) -> Path:
        return self.logs / f"work-{i}"

    def executor_logs(self) -> dict[int, list[Path]]:
        """Worker index -> the stderr files of the executors it launched."""
        return {i: sorted(self.worker_dir(i).glob("app-*/*/stderr")) for i in range(len(self.workers))}


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = unsupported()
    if reason is None and shutil.which("java") is None:
        reason = "java is not on PATH"
    if reason is not None:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    logs = tmp_path_factory.mktemp("netns-cluster")
    try:
        net = Network()
    except subprocess.CalledProcessError as e:
        reason = f"cannot create a bridge here: {(e.stderr or '').strip()[:300]}"
        print(f"skipped: {reason}")
        pytest.skip(reason)
    with net:
        try:
            master = net.add_host()
        except subprocess.CalledProcessError as e:
            reason = f"cannot create network namespaces here: {(e.stderr or '').strip()[:300]}"
            print(f"skipped: {reason}")
            pytest.skip(reason)
        workers = [net.add_host() for _ in range(WORKERS)]
        c = Cluster(net, master, workers, logs)
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        master_ports = ["--port", str(MASTER_PORT), "--webui-port", str(MASTER_UI)]
        worker_opts = ["--cores", "1", "--memory", "1500m", "--webui-port", str(WORKER_UI)]
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable, **daemon_env()}
        net.popen(
            master,
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", master.ip, *master_ports],
            logs / "master.log",
            {**env, "SPARK_LOCAL_IP": master.ip},
        )
        for i, w in enumerate(workers):
            net.popen(
                w,
                [spark_class, "org.apache.spark.deploy.worker.Worker", c.url, "--host", w.ip, *worker_opts],
                logs / f"worker-{i}.log",
                {**env, "SPARK_LOCAL_IP": w.ip, "SPARK_WORKER_DIR": str(c.worker_dir(i))},
            )
        started = time.monotonic()
        _wait_for_workers(c, 120)
        print(f"master and {WORKERS} workers registered in {time.monotonic() - started:.1f} s")
        yield c


def _wait_for_workers(c: Cluster, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    alive: list[str] = []
    while time.monotonic() < deadline:
        try:
            state = _get_json(f"http://{c.master.ip}:{MASTER_UI}/json/")
            alive = sorted(w["host"] for w in state.get("workers", []) if w["state"] == "ALIVE")
        except (OSError, ValueError):  # not up yet; or, while it starts, an HTML page
            pass
        if alive == sorted(w.ip for w in c.workers):
            return
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.name}\n{_tail(p)}" for p in sorted(c.logs.glob("*.log")))
    pytest.fail(
        f"workers {[w.ip for w in c.workers]} did not all register with {c.url} in {seconds} s "
        f"(registered: {alive})\n{logs}"
    )


def _unreachable_driver(c: Cluster) -> str | None:
    """The complaint of an executor that could not reach the driver, if one has made it."""
    for paths in c.executor_logs().values():
        for p in paths:
            text = p.read_text(errors="replace")
            if "Successfully registered with driver" in text:
                continue
            for line in text.splitlines():
                if "Failed to connect to" in line or "Connection refused" in line:
                    return f"{p}: {line.strip()}"
    return None


def submit(c: Cluster, inp: Path, out: Path, log: Path) -> None:
    """./spark-submit.sh from this machine's side of the bridge, advertising its address
    there; fails the test, saying why, when the run fails or does not end by the deadline."""
    argv = [str(ROOT / "spark-submit.sh"), "--master", c.url]
    argv += ["--conf", f"spark.driver.host={c.net.gateway}", "--conf", "spark.executor.memory=1g"]
    argv += ["--conf", f"spark.pyspark.python={sys.executable}"]
    # One shuffle partition per executor core rather than Spark's 200, and not local mode's
    # 8: the output must not depend on them. Adaptive execution stays on, as on a cluster
    # (test_cluster.py's runs go without it). No web UI and no report.html: nobody looks at
    # them.
    argv += ["--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.ui.enabled=false"]
    for setting in submit_conf():  # C1 only (short_jvm.py)
        argv += ["--conf", setting]
    argv.append("--")
    argv += ["dedup", "--input", str(inp), "--output", str(out), "--set", "report.html=false"]
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYTHON": sys.executable}
    env["PYSPARK_PYTHON"] = sys.executable
    with log.open("wb") as f:
        # A session of its own: on a failure the driver's JVM and its Python go together.
        proc = subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + JOB_DEADLINE
        problem = None
        while proc.poll() is None and problem is None:
            if time.monotonic() > deadline:
                problem = f"the job did not finish in {JOB_DEADLINE} s"
            elif (complaint := _unreachable_driver(c)) is not None:
                problem = (
                    "executors could not connect to the driver (it must advertise an address they "
                    f"reach: spark.driver.host={c.net.gateway}, the bridge): {complaint}"
                )
            else:
                time.sleep(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if problem is None and proc.returncode == 0:
        return
    executors = "\n".join(
        f"--- worker {i} ({c.workers[i].ip}) {p.relative_to(c.logs)}\n{_tail(p, 10)}"
        for i, paths in c.executor_logs().items()
        for p in paths
    )
    pytest.fail(
        f"{problem or f'spark-submit exited with {proc.returncode}'}\n--- driver\n{_tail(log, 40)}\n"
        f"{executors or '--- no executor was launched'}"
    )


def test_cluster_of_namespaces_gives_the_brute_force_clusters(
    cluster: Cluster, chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    inp, want = chains_corpus
    out = tmp_path / "cluster-out"
    started = time.monotonic()
    submit(cluster, inp, out, tmp_path / "driver.log")
    print(f"job on the cluster of namespaces: {time.monotonic() - started:.1f} s")
    assert (out / "_SUCCESS").exists()
    # Both workers ran tasks, each from its own namespace, talking to the driver on the bridge.
    for i, paths in cluster.executor_logs().items():
        text = "".join(p.read_text(errors="replace") for p in paths)
        assert f"@{cluster.net.gateway}:" in text, f"worker {i}: no executor connected to the driver"
        assert "Running task" in text, f"worker {i} ({cluster.workers[i].ip}) ran no task"
    # Every document's kept document, status and similarity to it are the brute-force ones
    # (exact Jaccard >= 0.8 and exact copies, connected, the guard at 0.7: the defaults).
    assert read_result(out) == want
