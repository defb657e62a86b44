"""A real standalone cluster on 127.0.0.1 (master + two workers started with spark-class),
driven through ./spark-submit.sh, must give the same clusters as local mode."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from heavy import HeavyCorpus, check_clusters, long_documents_jsonl

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
SPARK_HOME = Path(pyspark.__file__).parent

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {seconds} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    logs = tmp_path_factory.mktemp("cluster-logs")
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(logs / "work"),
    }
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            env=env,
            stdout=open(logs / "master.log", "w"),  # noqa: SIM115 - lives as long as the process
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        _wait_port(port, 90)
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1500m",
                        "--webui-port",
                        str(_free_port()),
                    ],
                    env=env,
                    stdout=open(logs / f"worker{i}.log", "w"),  # noqa: SIM115
                    stderr=subprocess.STDOUT,
                )
            )
        time.sleep(5)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _clusters(path: Path) -> list[tuple[object, object, str]]:
    t = pq.read_table(path / "clusters").to_pylist()
    return sorted((r["id"], r["cluster_id"], r["status"]) for r in t)


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": str(SPARK_HOME),
        "PYTHON": sys.executable,
    }


def submit(
    cluster: str, executor_memory: str, *dedup_args: str, timeout: int = 1500
) -> subprocess.CompletedProcess[str]:
    """./spark-submit.sh against `cluster` with executors of `executor_memory`."""
    return subprocess.run(
        [
            str(ROOT / "spark-submit.sh"),
            "--master",
            cluster,
            "--conf",
            f"spark.executor.memory={executor_memory}",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            "--",
            "dedup",
            *dedup_args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=ROOT,
    )


def test_standalone_cluster_matches_local(cluster: str, tmp_path: Path) -> None:
    env = _env()
    out = tmp_path / "cluster-out"
    proc = submit(cluster, "1g", "--input", str(SAMPLE), "--output", str(out), "--set", "minhash.method=oph")
    assert proc.returncode == 0, proc.stderr[-4000:]
    # PythonRunner merges the driver's stderr into stdout under spark-submit.
    assert "stage check" in proc.stdout + proc.stderr
    local = tmp_path / "local-out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neardup",
            "dedup",
            "--input",
            str(SAMPLE),
            "--output",
            str(local),
            "--set",
            "minhash.method=oph",
            "--master",
            "local[1]",
            "--conf",
            "spark.sql.shuffle.partitions=3",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert _clusters(out) == _clusters(local)
    assert (out / "_SUCCESS").exists()


def test_heavy_tailed_corpus_on_executors_of_1g(
    cluster: str, heavy_corpus: HeavyCorpus, tmp_path: Path
) -> None:
    """The ~1 GB heavy-tailed corpus (one document of 50 MB) through executors of 1 GB."""
    out = tmp_path / "out"
    proc = submit(cluster, "1g", "--input", str(heavy_corpus.path), "--output", str(out))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    check_clusters(out, heavy_corpus)


def test_executors_out_of_memory_name_the_stage_and_the_setting(cluster: str, tmp_path: Path) -> None:
    """Executors too small for the documents: after Spark's retries, one line that names the
    stage and spark.executor.memory, exit code 1."""
    corpus = tmp_path / "long.jsonl"
    long_documents_jsonl(corpus, docs=2, words_each=25_000_000)  # ~150 MB each
    proc = submit(cluster, "512m", "--input", str(corpus), "--output", str(tmp_path / "out"), timeout=900)
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
