"""Example Airflow DAG: neardup's dedup job through SparkSubmitOperator.

Two tasks that do what ./spark-submit.sh does: `build_zip` zips lib/neardup into NEARDUP_ZIP
(scripts/build_zip.py, the same script spark-submit.sh runs), then `dedup` submits
jobs/dedup.py with that zip as --py-files. Written for Airflow 3; tested with apache-airflow
3.3.2 and apache-airflow-providers-apache-spark 6.3.4 (tests/e2e/test_airflow.py runs it on
local Spark against the sample corpus).

Install: symlink this file into the Airflow dags folder (symlinks are resolved, so
NEARDUP_HOME defaults to this checkout) or copy it and set NEARDUP_HOME. Everything else
comes from the environment of the DAG processor and the workers (both must agree):

  NEARDUP_HOME          a neardup checkout on the worker: jobs/, scripts/, lib/
                        (default: the checkout holding this file)
  NEARDUP_ZIP           the --py-files zip that build_zip writes and dedup submits
                        (default: $NEARDUP_HOME/build/neardup.zip, where spark-submit.sh puts it)
  NEARDUP_INPUT         default of the run parameter `input`
                        (default: $NEARDUP_HOME/data/sample/corpus.jsonl.gz)
  NEARDUP_OUTPUT        default of the run parameter `output` (default: $NEARDUP_HOME/out/airflow)
  NEARDUP_SPARK_SUBMIT  absolute path of <SPARK_HOME>/bin/spark-submit, e.g. a venv's
                        .../site-packages/pyspark/bin/spark-submit; also sets SPARK_HOME
                        (default: unset, `spark-submit` from the worker's PATH and SPARK_HOME
                        from its environment)
  NEARDUP_PYTHON        Python with neardup's dependencies (numpy, pyarrow, numba, pyyaml; and
                        matplotlib for report.html) for the driver and the executors (default:
                        unset, Spark's own choice)
  NEARDUP_VENV_ARCHIVE  a packed venv shipped with --archives, as in spark-submit.sh (default: unset)
  NEARDUP_SPARK_CONN_ID the Airflow connection naming the Spark master (default: spark_default)

The master comes from that connection, which can itself be an environment variable:
  AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'
  AIRFLOW_CONN_SPARK_DEFAULT='spark://spark-master:7077'
Without the connection the provider silently falls back to `--master yarn`.

Per run, `input` and `output` can be overridden with the run's conf, e.g.
  airflow dags trigger neardup_dedup -c '{"input": "s3a://b/corpus/", "output": "s3a://b/dedup/"}'
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG, Param, task
except ImportError:  # Airflow 2.11 (the provider's oldest; not tested here)
    from airflow import DAG
    from airflow.decorators import task
    from airflow.models.param import Param


def _env(name: str, default: str) -> str:
    """The variable's value, or `default` when it is unset or empty."""
    return os.environ.get(name) or default


# Absolute paths throughout: the operator runs spark-submit in the worker's working
# directory (it has no cwd option), so a relative application or --py-files path would
# resolve against wherever the worker happens to run.
HOME = _env("NEARDUP_HOME", os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
ZIP = _env("NEARDUP_ZIP", os.path.join(HOME, "build", "neardup.zip"))
SPARK_SUBMIT = os.environ.get("NEARDUP_SPARK_SUBMIT")
PYTHON = os.environ.get("NEARDUP_PYTHON")
VENV_ARCHIVE = os.environ.get("NEARDUP_VENV_ARCHIVE")

# spark-submit's environment. In local and client mode the operator adds these to the
# spark-submit process's environment; on YARN and Kubernetes it turns them into
# spark.yarn.appMasterEnv.* / spark.kubernetes.driverEnv.* settings instead, so leave the
# paths unset there and let the cluster image provide Spark and Python.
env_vars: dict[str, str] = {}
if SPARK_SUBMIT:
    # pip's pyspark finds its SPARK_HOME by running find_spark_home.py with whichever Python
    # is first among PYSPARK_DRIVER_PYTHON, PYSPARK_PYTHON and python3; on an Airflow worker
    # that can be Airflow's own venv, whose `pyspark` (from pyspark-client, a provider
    # dependency) has no jars and no bin/. Naming SPARK_HOME skips the search.
    env_vars["SPARK_HOME"] = os.path.dirname(os.path.dirname(SPARK_SUBMIT))
if PYTHON:
    # The driver runs jobs/dedup.py and the executors run the kernels: both need numba,
    # numpy, pyarrow and pyyaml, which Airflow's Python does not have.
    env_vars["PYSPARK_PYTHON"] = PYTHON
    env_vars["PYSPARK_DRIVER_PYTHON"] = PYTHON

# Spark logs at INFO under spark-submit (about 20,000 lines for the 3,000-document sample),
# and the operator copies every line into the task log. WARN keeps errors and warnings;
# neardup's own stage lines and summary are printed, not logged, so they stay. (This acts
# in the driver's SparkContext only: spark-submit's client-side lines, which the operator
# reads YARN/Kubernetes ids from in cluster mode, are untouched.)
conf = {"spark.log.level": "WARN"}
archives = None
if VENV_ARCHIVE:
    # As spark-submit.sh does with NEARDUP_VENV_ARCHIVE: unpack the venv next to each
    # executor as ./neardup_env and run the executors' Python from it.
    archives = f"{VENV_ARCHIVE}#neardup_env"
    conf["spark.pyspark.python"] = "./neardup_env/bin/python"

with DAG(
    dag_id="neardup_dedup",
    schedule=None,  # run on demand (or from an upstream DAG); set a schedule to run it periodically
    start_date=datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    # Two runs writing the same output at once would race for it; one at a time.
    max_active_runs=1,
    tags=["neardup", "spark"],
    params={
        "input": Param(
            _env("NEARDUP_INPUT", os.path.join(HOME, "data", "sample", "corpus.jsonl.gz")), type="string"
        ),
        "output": Param(_env("NEARDUP_OUTPUT", os.path.join(HOME, "out", "airflow")), type="string"),
    },
    doc_md=__doc__,
) as dag:

    @task(task_id="build_zip")
    def build_zip() -> None:
        """Rebuild the --py-files zip from lib/ so it never goes stale (spark-submit.sh does
        the same on every submit). It must run on the worker that runs `dedup`, since the zip
        is a local path there; with several workers, build the zip into the image or onto
        storage every worker reads (spark-submit takes hdfs:// or s3a:// --py-files) instead."""
        # The worker's own Python is enough: scripts/build_zip.py uses the standard library only.
        subprocess.run([sys.executable, os.path.join(HOME, "scripts", "build_zip.py"), ZIP], check=True)

    dedup = SparkSubmitOperator(
        task_id="dedup",
        # The master (and deploy mode, queue...) comes from this Airflow connection.
        conn_id=_env("NEARDUP_SPARK_CONN_ID", "spark_default"),
        # jobs/dedup.py is the spark-submit entry point: the same command line as `neardup`.
        application=os.path.join(HOME, "jobs", "dedup.py"),
        # The package itself travels with the job, so driver and executors import the same code.
        py_files=ZIP,
        application_args=[
            "dedup",
            "--input",
            "{{ params.input }}",
            "--output",
            "{{ params.output }}",
            # Retries and reruns replace the previous output; the job swaps the new one in only
            # once it has passed its checks, so a failed attempt leaves the old output intact.
            "--overwrite",
        ],
        name="neardup-dedup",  # the Spark application name in the UI and the history server
        # An absolute path is accepted here, unlike the connection's `spark-binary` extra,
        # which must be a bare spark-submit/spark2-submit/spark3-submit on the PATH.
        spark_binary=SPARK_SUBMIT,
        env_vars=env_vars or None,
        archives=archives,
        conf=conf,
        # For components.backend=graphframes, add its package here, e.g.
        # packages="io.graphframes:graphframes-spark4_2.13:0.11.0"; without it, `auto` uses the
        # built-in implementation.
    )

    build_zip() >> dedup
