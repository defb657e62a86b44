"""Runs inside the Airflow venv (not the project's), driven by test_airflow.py:

    python airflow_driver.py parse DAGS_FOLDER OVERLAYS_JSON RESULT_JSON
        For each environment overlay (a JSON list of {name: value or null}), set it, load
        DAGS_FOLDER in a fresh DagBag and record the import errors and every task's settings.
    python airflow_driver.py run DAGS_FOLDER DAG_ID RUN_CONF_JSON RESULT_JSON
        One real run with dag.test() (in process: no scheduler, no executor), recording the
        DagRun's state and each task's.

AIRFLOW_HOME and AIRFLOW__CORE__LOAD_EXAMPLES=False must be in the environment before this
starts: Airflow reads its configuration when first imported. `run` needs a migrated database
(`airflow db migrate`). Results go to RESULT_JSON; stdout is Airflow's log."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _dagbag(folder: str) -> Any:
    # Airflow 3.3 removed DagBag(include_examples=...); AIRFLOW__CORE__LOAD_EXAMPLES decides.
    from airflow.models import DagBag

    return DagBag(dag_folder=folder)


def _errors(bag: Any) -> dict[str, str]:
    return {str(path): str(error) for path, error in bag.import_errors.items()}


def _task(task: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"type": task.task_type, "upstream": sorted(task.upstream_task_ids)}
    if task.task_type == "SparkSubmitOperator":
        info |= {
            "conn_id": task._conn_id,
            "application": task.application,
            "py_files": task.py_files,
            "application_args": task.application_args,
            "spark_binary": task._spark_binary,
            "env_vars": task.env_vars,
            "archives": task._archives,
            "conf": task.conf,
            "name": task.name,
        }
    return info


def parse(folder: str, overlays: list[dict[str, str | None]]) -> list[dict[str, Any]]:
    results = []
    for overlay in overlays:
        for name, value in overlay.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        bag = _dagbag(folder)
        results.append(
            {
                "import_errors": _errors(bag),
                "dags": {
                    dag_id: {
                        "params": {k: dag.params[k] for k in dag.params},
                        "max_active_runs": dag.max_active_runs,
                        "tasks": {t.task_id: _task(t) for t in dag.tasks},
                    }
                    for dag_id, dag in bag.dags.items()
                },
            }
        )
    return results


def run(folder: str, dag_id: str, run_conf: dict[str, Any]) -> dict[str, Any]:
    bag = _dagbag(folder)
    if bag.import_errors:
        return {"state": "import_errors", "import_errors": _errors(bag)}
    start = time.monotonic()
    # dag.test() does not raise when a task fails: the returned DagRun's state says so.
    dag_run = bag.dags[dag_id].test(run_conf=run_conf)
    return {
        "state": str(dag_run.state),
        "tasks": {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()},
        "seconds": round(time.monotonic() - start, 1),
    }


if __name__ == "__main__":
    mode, folder, *rest = sys.argv[1:]
    if mode == "parse":
        result: Any = parse(folder, json.loads(rest[0]))
    else:
        result = run(folder, rest[0], json.loads(rest[1]))
    with open(rest[-1], "w") as f:
        json.dump(result, f)
