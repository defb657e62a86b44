#!/usr/bin/env bash
# Package lib/ and submit jobs/dedup.py to any Spark master.
#
#   ./spark-submit.sh [--with-graphframes] [spark-submit options] -- dedup --input ... --output ... [neardup options]
#
# --with-graphframes adds the GraphFrames package matching the pyspark found here (Spark
# major version and Scala binary version) to --packages, for components.backend=graphframes.
#
# Executors need Python with numpy, pyarrow, numba and pyyaml (the driver also matplotlib,
# for report.html, unless --set report.html=false). Either they have it
# (a cluster image, see docker/), or set NEARDUP_VENV_ARCHIVE to a packed virtual
# environment (venv-pack / conda-pack .tar.gz) and it is shipped with --archives.
# SPARK_SUBMIT overrides which spark-submit runs (default: $SPARK_HOME/bin or pyspark's own).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"

submit_opts=()
with_graphframes=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  if [ "$1" = "--with-graphframes" ]; then with_graphframes=1; else submit_opts+=("$1"); fi
  shift
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [spark-submit options] -- dedup --input PATH --output PATH [options]" >&2
  exit 2
fi
shift  # the --

if [ -n "${SPARK_SUBMIT:-}" ]; then submit="$SPARK_SUBMIT"
elif [ -n "${SPARK_HOME:-}" ]; then submit="$SPARK_HOME/bin/spark-submit"
else submit="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"))')"
fi

build="$here/build"
mkdir -p "$build"
zip_path="$build/neardup.zip"
# A zip of the package (py + the packaged YAML defaults), rebuilt every time so it never goes stale.
"$python" "$here/scripts/build_zip.py" "$zip_path"

extra=()
if [ "$with_graphframes" = 1 ]; then
  coordinate="$(PYTHONPATH="$here/lib" "$python" -c 'from neardup.runtime.packages import graphframes_package; print(graphframes_package())')"
  extra+=(--packages "$coordinate")
fi
if [ -n "${NEARDUP_VENV_ARCHIVE:-}" ]; then
  extra+=(--archives "$NEARDUP_VENV_ARCHIVE#neardup_env" --conf spark.pyspark.python=./neardup_env/bin/python)
fi

exec "$submit" "${submit_opts[@]}" "${extra[@]}" --py-files "$zip_path" "$here/jobs/dedup.py" "$@"
