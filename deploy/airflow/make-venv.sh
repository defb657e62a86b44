#!/usr/bin/env bash
# Create (or reuse) a virtual environment with Airflow and its Spark provider, for the
# example DAG and tests/e2e/test_airflow.py:
#
#   deploy/airflow/make-venv.sh [DIR]        (default DIR: .venv-airflow in the repository)
#
# With UV set to a uv executable, uv installs the same pins instead of pip.
#
# Airflow gets its own venv, never the project's .venv: the Spark provider depends on
# `pyspark-client`, which installs over the same `pyspark/` package files as pyspark but
# without the jars or bin/spark-submit, so sharing a venv silently breaks pyspark.
# The job runs with the project's pyspark (its spark-submit), not with anything here.
#
# Versions are pinned. On Python 3.11 every transitive dependency is pinned too, with
# constraints-py3.11.txt (a `pip freeze` of a clean install: Airflow's own constraints
# files live on raw.githubusercontent.com, which CI cannot reach); on other Pythons only
# the two top-level pins apply. A venv is reused when its stamp (pins, constraints, Python)
# matches, and rebuilt from scratch otherwise; the stamp is written last, so an interrupted
# install is never reused.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:-$(cd "$here/../.." && pwd)/.venv-airflow}"
python="${PYTHON:-python3}"
pins=(apache-airflow==3.3.2 apache-airflow-providers-apache-spark==6.3.4)

constraints=()
if [ "$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.11 ]; then
  constraints=(-c "$here/constraints-py3.11.txt")
fi
stamp="$( { echo "${pins[*]}"; "$python" -VV; [ ${#constraints[@]} -eq 0 ] || cat "$here/constraints-py3.11.txt"; } \
  | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"

if [ -x "$venv/bin/airflow" ] && [ "$(cat "$venv/.neardup-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "make-venv: reusing $venv" >&2
  exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv"
echo '*' > "$venv/.gitignore"  # as Python 3.13's venv does: never committed, no root .gitignore entry needed
if [ -n "${UV:-}" ]; then  # uv (its path in UV), as .ci/run sets it: the same pins, a tenth of pip's CPU
  "$UV" pip install --quiet --python "$venv/bin/python" "${constraints[@]}" "${pins[@]}"
else
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "${constraints[@]}" "${pins[@]}"
fi
echo "$stamp" > "$venv/.neardup-stamp"
echo "make-venv: installed ${pins[*]} into $venv" >&2
