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
# environment (venv-pack / conda-pack .tar.gz, a path or a URL such as hdfs://...) and it
# is shipped with --archives: to the executors, and in cluster mode (--deploy-mode cluster)
# to the driver's container too.
# SPARK_SUBMIT overrides which spark-submit runs (default: $SPARK_HOME/bin or pyspark's own).
#
# Unless the job's arguments include --debug, Spark's start-up notices are kept off the
# terminal: the driver logs warnings and errors only, and the JVM's incubator-module line
# is dropped.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"

submit_opts=()
with_graphframes=0
deploy_mode=client
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  if [ "$1" = "--with-graphframes" ]; then with_graphframes=1; else submit_opts+=("$1"); fi
  # Where the driver runs: in cluster mode (YARN, Kubernetes) in a container of the cluster.
  case "$1" in
    --deploy-mode=cluster | spark.submit.deployMode=cluster) deploy_mode=cluster ;;
    --deploy-mode) if [ "${2:-}" = cluster ]; then deploy_mode=cluster; fi ;;
  esac
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
# The kernels compiled ahead of use, as the wheel ships them (lib/neardup/kernels/precompile.py),
# so that executors load them instead of compiling them: once per change of the kernels'
# sources or of this Python's numba, numpy or llvmlite (half a minute), kept in build/.
# Executors whose environment differs from this Python's compile as before. Skipped where
# this Python has no numba, or with NEARDUP_PRECOMPILE=0.
compiled="$build/compiled"
zip_extra=()
if [ "${NEARDUP_PRECOMPILE:-1}" != 0 ]; then
  if PYTHONPATH="$here/lib" "$python" -m neardup.kernels.precompile --if-stale "$compiled" >/dev/null 2>"$build/precompile.log"; then
    zip_extra=(--compiled "$compiled")
  else
    echo "spark-submit.sh: the kernels were not compiled ahead (see $build/precompile.log); executors compile them" >&2
  fi
fi
# A zip of the package (py + the packaged YAML defaults), rebuilt every time so it never goes stale.
"$python" "$here/scripts/build_zip.py" "$zip_path" "${zip_extra[@]}"

extra=()
if [ "$with_graphframes" = 1 ]; then
  coordinate="$(PYTHONPATH="$here/lib" "$python" -c 'from neardup.runtime.packages import graphframes_package; print(graphframes_package())')"
  extra+=(--packages "$coordinate")
fi
if [ -n "${NEARDUP_VENV_ARCHIVE:-}" ]; then
  # Executors run the unpacked interpreter (the relative path exists in their working
  # directories). In client mode the driver keeps this one; in cluster mode it runs in a
  # container too, where the archive is unpacked as for the executors. The archive may be a
  # path or a URL (hdfs://...: uploaded once, not by every submit).
  extra+=(--archives "$NEARDUP_VENV_ARCHIVE#neardup_env" --conf spark.pyspark.python=./neardup_env/bin/python)
  if [ "$deploy_mode" = cluster ]; then
    extra+=(--conf spark.pyspark.driver.python=./neardup_env/bin/python)
  else
    extra+=(--conf "spark.pyspark.driver.python=${PYSPARK_DRIVER_PYTHON:-$python}")
  fi
fi

cmd=("$submit" "${submit_opts[@]}" "${extra[@]}" --py-files "$zip_path" "$here/jobs/dedup.py" "$@")
for arg in "$@"; do
  if [ "$arg" = "--debug" ]; then exec "${cmd[@]}"; fi  # Spark's output as Spark makes it
done
# Quiet Spark's start-up on the terminal. The driver JVM's log: warnings and errors only
# (lib/neardup/conf/log4j2.properties), unless SPARK_CONF_DIR has a log4j2.properties of
# the user's; SPARK_SUBMIT_OPTS reaches the driver in client mode, and the user's
# --driver-java-options still win.
conf_dir="${SPARK_CONF_DIR:-${SPARK_HOME:-/nonexistent}/conf}"
if [ ! -f "$conf_dir/log4j2.properties" ]; then
  export SPARK_SUBMIT_OPTS="-Dlog4j2.configurationFile=\"$here/lib/neardup/conf/log4j2.properties\" ${SPARK_SUBMIT_OPTS:-}"
fi
# The JVM itself prints this line when Spark (4) adds jdk.incubator.vector, and nothing
# turns it off: it is dropped from stderr here, every other line passes (in plain bash,
# line by line, as it comes).
notice="WARNING: Using incubator modules: jdk.incubator.vector"
exec "${cmd[@]}" 2> >(while IFS= read -r line || [ -n "$line" ]; do
  [ "$line" = "$notice" ] || printf '%s\n' "$line"
done >&2)
