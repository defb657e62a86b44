"""deploy/airflow/neardup_dag.py under a real Airflow: the DAG loads with the expected tasks and
settings, and one run with dag.test() deduplicates the tier's hundred generated documents on
local[2] (their brute-force clusters).

Airflow lives in its own venv (deploy/airflow/make-venv.sh explains why): NEARDUP_AIRFLOW_VENV
if set (`.ci/run` sets it after creating the venv, and then a venv that does not work fails the
test), else `.venv-airflow` in the repository, created here on first use (about a minute with a
warm pip cache) and skipped, with the reason, only if it cannot be created. This process drives
it through subprocesses (airflow_driver.py), each with a fresh AIRFLOW_HOME under tmp_path.
Airflow's log goes to a file; a failure shows its tail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyspark
import pytest
from short_jvm import C1_ONLY

from brute_force import Result, read_result

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "deploy" / "airflow"
DRIVER = Path(__file__).with_name("airflow_driver.py")
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
# The project venv's Spark and Python: the job never runs on the Airflow venv's pyspark-client.
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
ARGS = ["dedup", "--input", "{{ params.input }}", "--output", "{{ params.output }}", "--overwrite"]

pytestmark = [pytest.mark.slow, pytest.mark.platform, pytest.mark.airflow]


def _tail(path: Path, chars: int = 6000) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return text[-chars:]


@pytest.fixture(scope="module")
def airflow_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    required = os.environ.get("NEARDUP_AIRFLOW_VENV")
    venv = Path(required) if required else ROOT / ".venv-airflow"
    log = tmp_path_factory.mktemp("airflow-venv") / "make-venv.log"
    with log.open("w") as out:
        # Reuses a venv whose pins match in well under a second; builds one otherwise.
        proc = subprocess.run(
            ["bash", str(DAGS / "make-venv.sh"), str(venv)], stdout=out, stderr=subprocess.STDOUT
        )
    if proc.returncode != 0:
        reason = f"deploy/airflow/make-venv.sh {venv} failed (exit {proc.returncode}):\n{_tail(log, 2000)}"
        if required:
            pytest.fail(reason)
        pytest.skip(reason)
    return venv


def _environment(home: Path, overlay: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without anything that would answer for the DAG (Airflow's
    settings, NEARDUP_*, and the PYSPARK_PYTHON/SPARK_HOME that tests/conftest.py sets for
    in-process Spark), plus a private AIRFLOW_HOME and `overlay`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "NEARDUP_", "PYSPARK_")) and k != "SPARK_HOME"
    }
    env |= {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ next to the DAG in deploy/airflow
    }
    return env | dict(overlay)


def _drive(venv: Path, env: Mapping[str, str], log: Path, *args: str, timeout: int) -> Any:
    """Run airflow_driver.py in the Airflow venv, its output appended to `log`; its result."""
    result = log.with_suffix(".result.json")
    with log.open("a") as out:
        proc = subprocess.run(
            [str(venv / "bin" / "python"), str(DRIVER), *args, str(result)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            cwd=log.parent,
        )
    assert proc.returncode == 0, f"airflow_driver.py {args[0]} exit {proc.returncode}:\n{_tail(log)}"
    return json.loads(result.read_text())


def test_dag_loads_with_its_tasks_and_settings(airflow_venv: Path, tmp_path: Path) -> None:
    custom = {
        "NEARDUP_HOME": "/opt/neardup",
        "NEARDUP_ZIP": "/shared/neardup.zip",
        "NEARDUP_INPUT": "s3a://bucket/corpus/",
        "NEARDUP_OUTPUT": "s3a://bucket/dedup/",
        "NEARDUP_SPARK_SUBMIT": "/opt/spark/bin/spark-submit",
        "NEARDUP_PYTHON": "/opt/venv/bin/python",
        "NEARDUP_VENV_ARCHIVE": "hdfs:///envs/neardup.tar.gz",
        "NEARDUP_SPARK_CONN_ID": "spark_cluster",
    }
    # First every default (nothing set), then every variable set.
    overlays = [{k: None for k in custom}, custom]
    log = tmp_path / "parse.log"
    defaults, configured = _drive(
        airflow_venv,
        _environment(tmp_path / "home", {}),
        log,
        "parse",
        str(DAGS),
        json.dumps(overlays),
        timeout=300,
    )
    for parsed in (defaults, configured):
        assert parsed["import_errors"] == {}, _tail(log)
        assert list(parsed["dags"]) == ["neardup_dedup"]
        dag = parsed["dags"]["neardup_dedup"]
        assert dag["max_active_runs"] == 1
        assert set(dag["tasks"]) == {"build_zip", "dedup"}
        assert dag["tasks"]["dedup"]["type"] == "SparkSubmitOperator"
        assert dag["tasks"]["dedup"]["upstream"] == ["build_zip"]
        assert dag["tasks"]["dedup"]["application_args"] == ARGS

    # Defaults: this checkout, spark-submit.sh's zip, the sample corpus, nothing for Spark.
    dag = defaults["dags"]["neardup_dedup"]
    assert dag["params"] == {
        "input": str(SAMPLE),
        "output": str(ROOT / "out" / "airflow"),
    }
    assert {k: v for k, v in dag["tasks"]["dedup"].items() if k not in ("type", "upstream")} == {
        "conn_id": "spark_default",
        "application": str(ROOT / "jobs" / "dedup.py"),
        "py_files": str(ROOT / "build" / "neardup.zip"),
        "application_args": ARGS,
        "spark_binary": None,
        "env_vars": None,
        "archives": None,
        "conf": {"spark.log.level": "WARN"},
        "name": "neardup-dedup",
    }

    dag = configured["dags"]["neardup_dedup"]
    assert dag["params"] == {"input": "s3a://bucket/corpus/", "output": "s3a://bucket/dedup/"}
    assert {k: v for k, v in dag["tasks"]["dedup"].items() if k not in ("type", "upstream")} == {
        "conn_id": "spark_cluster",
        "application": "/opt/neardup/jobs/dedup.py",
        "py_files": "/shared/neardup.zip",
        "application_args": ARGS,
        "spark_binary": "/opt/spark/bin/spark-submit",
        "env_vars": {
            "SPARK_HOME": "/opt/spark",
            "PYSPARK_PYTHON": "/opt/venv/bin/python",
            "PYSPARK_DRIVER_PYTHON": "/opt/venv/bin/python",
        },
        "archives": "hdfs:///envs/neardup.tar.gz#neardup_env",
        "conf": {"spark.log.level": "WARN", "spark.pyspark.python": "./neardup_env/bin/python"},
        "name": "neardup-dedup",
    }


def test_dag_run_deduplicates_on_local_spark(
    airflow_venv: Path, chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    inp, want = chains_corpus
    log = tmp_path / "airflow.log"
    out = tmp_path / "out"
    env = _environment(
        tmp_path / "home",
        {
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "NEARDUP_ZIP": str(tmp_path / "build" / "neardup.zip"),
            "NEARDUP_SPARK_SUBMIT": str(SPARK_SUBMIT),
            "NEARDUP_PYTHON": sys.executable,
            # The input from the environment, the output from the run's conf (which wins).
            "NEARDUP_INPUT": str(inp),
            "NEARDUP_OUTPUT": str(tmp_path / "not-this-output"),
            # The driver's JVM, started by spark-submit, compiles with C1 only, as the tier's
            # other short-lived JVMs (short_jvm.py); the operator passes the environment on.
            "SPARK_SUBMIT_OPTS": C1_ONLY,
        },
    )
    with log.open("w") as f:
        migrate = subprocess.run(
            [str(airflow_venv / "bin" / "airflow"), "db", "migrate"],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=300,
            cwd=tmp_path,
        )
    assert migrate.returncode == 0, _tail(log)

    result = _drive(
        airflow_venv,
        env,
        log,
        "run",
        str(DAGS),
        "neardup_dedup",
        json.dumps({"output": str(out)}),
        timeout=1200,
    )
    assert result["state"] == "success" and result["tasks"] == {"build_zip": "success", "dedup": "success"}, (
        f"{result}\n{_tail(log)}"
    )

    # build_zip wrote the zip where NEARDUP_ZIP says, and dedup submitted it, with the master
    # from the connection and the project venv's spark-submit.
    with zipfile.ZipFile(tmp_path / "build" / "neardup.zip") as z:
        assert "neardup/cli.py" in z.namelist()
    text = log.read_text(errors="replace")
    command = next((line for line in text.splitlines() if "Spark-Submit cmd:" in line), "")
    for part in (str(SPARK_SUBMIT), "--master local[2]", f"--py-files {tmp_path}/build/neardup.zip"):
        assert part in command, command or _tail(log)

    assert (out / "_SUCCESS").exists(), _tail(log)
    assert not (tmp_path / "not-this-output").exists()
    report = json.loads((out / "report.json").read_text())
    # spark-submit started the JVM for a local master: the run still took a small local
    # input's shuffle settings, a partition per task slot and no adaptive execution.
    assert (report["spark"]["master"], report["spark"]["shuffle_partitions"]) == ("local[2]", 2)
    assert report["spark"]["adaptive"] is False
    assert read_result(out) == want
