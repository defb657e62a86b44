"""The Databricks job (deploy/databricks), checked offline: no workspace, no credentials.

1. The job definitions (the bundle's job resource and the Jobs API body) parse losslessly with
   databricks-sdk's `JobSettings` and with databricks-bundles' strict `Job`, describe the same
   job, and run what we mean: the `neardup` entry point of the `neardup` wheel with `dedup ...`,
   the wheel and the GraphFrames jar (Scala suffix matching the runtime) as libraries.
2. The runtime the job names ships versions of the wheel's requirements that satisfy them, so
   installing the wheel there adds packages and replaces none (pyspark least of all).
3. The wheel, built from a clean copy of the tracked files and installed with its `spark` extra
   into a fresh virtual environment pinned to that runtime's library versions, runs the job
   through its installed `neardup` entry point: the brute-force clusters of the tier's hundred
   generated documents (`chains_corpus`), report.html drawn with the runtime's matplotlib.
4. In that environment, the way a python_wheel_task runs it: a SparkSession exists first, the
   entry point found in the wheel's metadata is called in the same process with sys.argv set,
   and it works in that session (same application), which is still alive afterwards.

`JobSettings.from_dict` drops unknown keys silently (a typo such as `python_wheel_taks` just
becomes None), so the round trip `as_dict(from_dict(d)) == d` is the check, not the parse.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from brute_force import Result, read_result

pytestmark = [pytest.mark.slow, pytest.mark.platform]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "databricks"
BUNDLE = DEPLOY / "databricks.yml"
JOB_JSON = DEPLOY / "job.json"
JOB_KEY = "neardup_dedup"


# --- 1. the job definitions -------------------------------------------------------------


def _bundle() -> dict[str, Any]:
    return yaml.safe_load(BUNDLE.read_text())


def _bundle_job() -> dict[str, Any]:
    return _bundle()["resources"]["jobs"][JOB_KEY]


def _api_job() -> dict[str, Any]:
    return json.loads(JOB_JSON.read_text())


def _pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _roundtrip(d: dict[str, Any]) -> Any:
    from databricks.sdk.service.jobs import JobSettings

    settings = JobSettings.from_dict(d)
    assert settings.as_dict() == d, "a key was lost or changed in the round trip: a typo or an unknown field?"
    return settings


@pytest.mark.parametrize("which", ["bundle", "jobs_api"])
def test_job_definition_round_trips_and_runs_the_wheel_entry_point(which: str) -> None:
    from databricks.sdk.service.compute import Library, MavenLibrary
    from databricks.sdk.service.jobs import PythonWheelTask

    d = _bundle_job() if which == "bundle" else _api_job()
    settings = _roundtrip(d)
    assert settings.max_concurrent_runs == 1  # two runs on one output share its staging directory

    (task,) = settings.tasks
    wheel_task = task.python_wheel_task
    assert isinstance(wheel_task, PythonWheelTask)
    assert (wheel_task.package_name, wheel_task.entry_point) == ("neardup", "neardup")
    params = wheel_task.parameters
    assert params[0] == "dedup"
    for flag in ("--input", "--output"):
        i = params.index(flag)
        assert params[i + 1] and not params[i + 1].startswith("--")
    assert "--overwrite" in params

    # The entry point is the wheel's console script (the name Databricks looks up).
    scripts = _pyproject()["project"]["scripts"]
    assert scripts[wheel_task.entry_point] == "neardup.cli:console"

    libs = task.libraries
    assert libs and all(isinstance(lib, Library) for lib in libs)
    (whl,) = [lib.whl for lib in libs if lib.whl]
    assert whl.endswith(".whl")
    (maven,) = [lib.maven for lib in libs if lib.maven]
    assert isinstance(maven, MavenLibrary)
    group, artifact, jar_version = maven.coordinates.split(":")
    assert group == "io.graphframes" and artifact.startswith("graphframes-spark")
    # GraphFrames' Python package (the wheel's `graphframes` extra cannot be asked for through a
    # whl library) in the jar's version: the Python side calls the jar's methods.
    (pypi,) = [lib.pypi.package for lib in libs if lib.pypi]
    assert pypi == f"graphframes-py=={jar_version}"
    # The version neardup pins (its `graphframes` extra, the package it adds itself).
    from neardup.runtime.packages import GRAPHFRAMES_VERSION

    assert jar_version == GRAPHFRAMES_VERSION

    clusters = {c.job_cluster_key: c.new_cluster for c in settings.job_clusters}
    spec = clusters[task.job_cluster_key]
    # The jar's Scala (_2.12 / _2.13) and Spark major (spark3 / spark4) match the runtime's:
    # 15.x and 16.x are Spark 3.5, 17.x and later Spark 4 (Scala 2.13 only).
    m = re.fullmatch(r"(\d+)\.(\d+)\.x-scala(2\.1[23])", spec.spark_version)
    assert m, spec.spark_version
    major, scala = int(m.group(1)), m.group(3)
    assert artifact == f"graphframes-spark{4 if major >= 17 else 3}_{scala}"
    # neardup drives the JVM through py4j: a dedicated (single user) cluster, not standard
    # (shared) access mode or serverless.
    assert spec.data_security_mode.value in ("SINGLE_USER", "DATA_SECURITY_MODE_DEDICATED")
    # Static settings neardup applies only to sessions it creates (a wheel task reuses one).
    assert spec.spark_conf["spark.buffer.pageSize"] == "2m"


def test_jobs_api_wheel_is_this_version() -> None:
    """job.json names an uploaded wheel file: it must be the version pyproject.toml builds."""
    version = _pyproject()["project"]["version"]
    (whl,) = [lib["whl"] for lib in _api_job()["tasks"][0]["libraries"] if "whl" in lib]
    assert whl.rsplit("/", 1)[1] == f"neardup-{version}-py3-none-any.whl"


def test_bundle_builds_the_wheel_it_installs() -> None:
    bundle = _bundle()
    (artifact,) = bundle["artifacts"].values()
    assert artifact["type"] == "whl"
    assert "pip wheel --no-deps -w dist ../.." in artifact["build"]
    assert (DEPLOY / "../..").resolve() == ROOT  # the build's source is the repository root
    whls = [lib["whl"] for lib in _bundle_job()["tasks"][0]["libraries"] if "whl" in lib]
    assert whls == ["./dist/*.whl"]


def test_bundle_and_jobs_api_describe_the_same_job() -> None:
    """The bundle with its variables at their defaults is job.json, but for where the wheel is."""
    variables = {k: v["default"] for k, v in _bundle()["variables"].items()}

    def resolve(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: resolve(v) for k, v in x.items()}
        if isinstance(x, list):
            return [resolve(v) for v in x]
        if isinstance(x, str):
            return re.sub(r"\$\{var\.(\w+)\}", lambda m: str(variables[m.group(1)]), x)
        return x

    bundle_job, api_job = resolve(_bundle_job()), copy.deepcopy(_api_job())
    for job in (bundle_job, api_job):
        for lib in job["tasks"][0]["libraries"]:
            if "whl" in lib:
                lib["whl"] = "<wheel>"
    assert bundle_job == api_job


@pytest.mark.parametrize("which", ["bundle", "jobs_api"])
def test_job_definition_is_valid_for_databricks_bundles(which: str) -> None:
    """databricks-bundles' Job is strict (unknown field, bad enum, wrong type: ValueError)."""
    from databricks.bundles.jobs import Job

    d = _bundle_job() if which == "bundle" else _api_job()
    assert Job.from_dict(d).as_dict() == d


def test_a_typo_is_caught_by_the_round_trip_and_by_databricks_bundles() -> None:
    from databricks.bundles.jobs import Job
    from databricks.sdk.service.jobs import JobSettings

    d = _api_job()
    d["tasks"][0]["python_wheel_taks"] = d["tasks"][0].pop("python_wheel_task")
    assert JobSettings.from_dict(d).tasks[0].python_wheel_task is None  # silently dropped
    with pytest.raises(AssertionError, match="round trip"):
        _roundtrip(d)
    with pytest.raises(ValueError):
        Job.from_dict(d)


# --- 2. the runtime's libraries -----------------------------------------------------------


def _runtime_pins(spark_version: str) -> dict[str, str]:
    """deploy/databricks/runtime/<spark_version>.txt: name -> version the runtime ships."""
    path = DEPLOY / "runtime" / f"{spark_version}.txt"
    assert path.exists(), f"{path.relative_to(ROOT)}: list the runtime's versions of the wheel's requirements"
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _runtime_file() -> Path:
    return DEPLOY / "runtime" / f"{_api_job()['job_clusters'][0]['new_cluster']['spark_version']}.txt"


def test_the_runtime_satisfies_the_wheel_requirements() -> None:
    """Installing the wheel on the runtime must not replace the runtime's own libraries: each
    requirement it already ships is satisfied by the shipped version, and pyspark (which the
    runtime provides) is no requirement at all, only the `spark` extra."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    spark_version = _api_job()["job_clusters"][0]["new_cluster"]["spark_version"]
    pins = {canonicalize_name(k): v for k, v in _runtime_pins(spark_version).items()}
    requirements = [Requirement(r) for r in _pyproject()["project"]["dependencies"]]
    names = {canonicalize_name(r.name) for r in requirements}
    assert "pyspark" not in names
    assert set(pins) <= names
    for req in requirements:
        shipped = pins.get(canonicalize_name(req.name))
        if shipped is not None:
            assert req.specifier.contains(shipped), f"{spark_version} ships {req.name} {shipped}, not {req}"


# --- 3 and 4. the wheel, installed into a fresh environment --------------------------------


def _run(cmd: list[str], timeout: int, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)


class Installed:
    """A fresh virtual environment with the wheel (and its `spark` extra) installed."""

    def __init__(self, root: Path, wheel: Path, venv: Path) -> None:
        self.root, self.wheel, self.venv = root, wheel, venv
        self.python = venv / "bin" / "python"
        # Nothing of the test's own environment: the Python workers must be this venv's
        # interpreter (Databricks sets PYSPARK_PYTHON to its own), numba's cache stays here.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYSPARK_", "SPARK_", "NEARDUP_", "NUMBA_", "PYTHON", "VIRTUAL_ENV"))
        }
        env |= {
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "PYSPARK_PYTHON": str(self.python),
            "PYSPARK_DRIVER_PYTHON": str(self.python),
            "NUMBA_CACHE_DIR": str(root / "numba-cache"),
            # As in every test (tests/conftest.py): a run that starts its own JVM would
            # otherwise leave a builder dumping a class archive (a minute of CPU) beside the
            # tier's next tests. tests/e2e/test_class_archive.py is the archive's test.
            "NEARDUP_CLASS_ARCHIVE": "0",
        }
        self.env = env

    def run(self, *cmd: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
        return _run(list(cmd), timeout, env=self.env, cwd=self.root)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Installed]:
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    root = tmp_path_factory.mktemp("dbx")
    with zipfile.ZipFile(wheel) as z:
        (entry_points,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "neardup = neardup.cli:console" in z.read(entry_points).decode()

    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], 300)
    assert made.returncode == 0, made.stderr[-3000:]
    inst = Installed(root, wheel, venv)
    # The runtime's versions of numpy, pandas, pyarrow, pyyaml, matplotlib and scipy, as on the
    # cluster. No byte-code compiled ahead: the tests import a small part of what is installed
    # (pyspark alone holds over a thousand modules), and Python compiles that on import.
    # A cluster installs a wheel with pip; what the tests check is the wheel (its requirements,
    # entry point and files), which any installer installs the same, so .ci/run's uv does it
    # where it is there: 3 CPU-seconds where pip took 20, in a run short of CPU.
    requirement = ["-c", str(_runtime_file()), f"{wheel}[spark]"]
    if os.environ.get("UV"):
        links = [f"--find-links={d}" for d in os.environ.get("PIP_FIND_LINKS", "").split() if d]
        cmd = [os.environ["UV"], "pip", "install", "--quiet", "--python", str(inst.python), *links]
    else:
        cmd = [
            str(inst.python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--no-compile",
        ]
    pip = inst.run(*cmd, *requirement)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    yield inst
    shutil.rmtree(venv, ignore_errors=True)  # 1 GB (pyspark); the outputs stay for a look


_WHERE = textwrap.dedent(
    """
    import json
    from importlib.metadata import distribution, version

    import neardup

    print(json.dumps({
        "file": neardup.__file__,
        "direct_url": distribution("neardup").read_text("direct_url.json"),
        "versions": {
            name: version(name) for name in ("numpy", "pandas", "pyarrow", "pyyaml", "matplotlib", "scipy")
        },
    }))
    """
)


def test_installed_wheel_is_what_runs(installed: Installed) -> None:
    where = installed.run(str(installed.python), "-c", _WHERE)
    assert where.returncode == 0, where.stderr[-3000:]
    info = json.loads(where.stdout)
    assert Path(info["file"]).is_relative_to(installed.venv / "lib")  # not the source tree
    assert json.loads(info["direct_url"])["url"].endswith(installed.wheel.name)  # the wheel, not -e
    pins = _runtime_pins(_runtime_file().stem)
    names = ("numpy", "pandas", "pyarrow", "pyyaml", "matplotlib", "scipy")
    assert info["versions"] == {name: pins[name] for name in names}


def test_installed_entry_point_runs_the_job(installed: Installed, chains_corpus: tuple[Path, Result]) -> None:
    inp, want = chains_corpus
    out = installed.root / "out-cli"
    proc = installed.run(
        str(installed.venv / "bin" / "neardup"),
        "dedup", "--input", str(inp), "--output", str(out), "--master", "local[2]",
        "--conf", "spark.driver.memory=2g", "--conf", "spark.ui.enabled=false",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "_SUCCESS").exists() and (out / "report.html").exists()
    assert read_result(out) == want


# What a python_wheel_task does, as far as can be seen from outside: the cluster's SparkSession
# exists before any user code runs; Databricks finds the entry point in the wheel's metadata and
# calls it in the driver's Python process, with the task's parameters in sys.argv. (Its JVM
# compiles with C1 only, as the tier's other short-lived JVMs: tests/e2e/short_jvm.py.)
_WHEEL_TASK = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import entry_points
    from pyspark.sql import SparkSession

    corpus, out, missing, result_file = sys.argv[1:]
    spark = (
        SparkSession.builder.master("local[2]").appName("dbx-like")
        .config("spark.driver.memory", "2g").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1").getOrCreate()
    )
    before = spark.sparkContext.applicationId

    (ep,) = entry_points(group="console_scripts", name="neardup")
    main = ep.load()
    sys.argv = ["neardup", "dedup", "--input", corpus, "--output", out, "--overwrite"]
    code = main()

    active = SparkSession.getActiveSession()
    result = {
        "entry_point": ep.value,
        "code": code,
        "before": before,
        "after": active.sparkContext.applicationId if active else None,
        "app_name": active.sparkContext.appName if active else None,
        "stopped": bool(active.sparkContext._jsc.sc().isStopped()) if active else None,
    }
    # A failing run in the same session: neardup returns its exit code, it does not raise.
    sys.argv = ["neardup", "dedup", "--input", missing, "--output", out + "-missing"]
    try:
        result["missing_input_code"] = main()
    except SystemExit as e:
        result["missing_input_code"] = f"SystemExit({e.code})"
    after_failure = SparkSession.getActiveSession()
    result["after_failure"] = after_failure.sparkContext.applicationId if after_failure else None
    with open(result_file, "w") as f:
        json.dump(result, f)
    spark.stop()
    """
)


def test_wheel_task_reuses_the_active_session(
    installed: Installed, chains_corpus: tuple[Path, Result]
) -> None:
    inp, want = chains_corpus
    script = installed.root / "wheel_task.py"
    script.write_text(_WHEEL_TASK)
    out, result_file = installed.root / "out-task", installed.root / "result.json"
    proc = installed.run(
        str(installed.python), str(script),
        str(inp), str(out), str(installed.root / "no-such-input.jsonl"), str(result_file),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(result_file.read_text())
    assert result["entry_point"] == "neardup.cli:console"
    assert result["code"] == 0, proc.stderr[-3000:]
    # The same application, still alive, still the caller's (neardup made no session of its own).
    assert result["after"] == result["before"] and result["app_name"] == "dbx-like"
    assert result["stopped"] is False
    assert "the active session's JVM" in proc.stderr  # neardup's first line says it reused one
    assert read_result(out) == want
    # Failure is a return value (2: usage, a missing input), not an exception; the session lives.
    assert result["missing_input_code"] == 2
    assert result["after_failure"] == result["before"]
