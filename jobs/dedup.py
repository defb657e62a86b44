"""Entry point for spark-submit, Airflow's SparkSubmitOperator and Databricks
spark_python_task: the same command line as `neardup` (e.g. `dedup --input ...`)."""

import sys

from neardup.cli import main

if __name__ == "__main__":
    sys.exit(main())
