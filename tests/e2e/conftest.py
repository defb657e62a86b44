"""Fixtures of the end-to-end tier shared by its modules."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yarn
from cli_process import SAMPLE, neardup
from heavy import HeavyCorpus, build

from brute_force import Result, brute_force
from neardup_testkit import chains

ROOT = Path(__file__).resolve().parents[2]


def clean_copy(dest: Path) -> Path:
    """The tracked files, as a fresh clone has them (no build/ left by an earlier build)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src, dst = ROOT / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(src.readlink())
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel users install, built once per test session from a clean copy of the
    tracked files (test_wheel.py reads it, test_databricks.py installs it)."""
    root = tmp_path_factory.mktemp("wheel")
    source = clean_copy(root / "src")
    dist = root / "dist"
    # The kernels compiled once for the tier: spark-submit.sh's build/compiled (made here if
    # no submit made it yet), which the build copies where its key is the build's own (the
    # same sources, numba, llvmlite and numpy: setup.py); else the build compiles them.
    compiled = ROOT / "build" / "compiled"
    precompile = [sys.executable, "-m", "neardup.kernels.precompile", "--if-stale", str(compiled)]
    made = subprocess.run(precompile, capture_output=True, text=True, timeout=600, check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    env = {**os.environ, "NEARDUP_PRECOMPILED": str(compiled)}
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(dist), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)
    print("\n".join(line for line in proc.stdout.splitlines() if "precompile" in line))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = dist.glob("neardup-*.whl")
    return built


@pytest.fixture(scope="session")
def heavy_corpus(tmp_path_factory: pytest.TempPathFactory) -> HeavyCorpus:
    """The ~95 MB heavy-tailed corpus (heavy.py), built once per test session."""
    return build(tmp_path_factory.mktemp("heavy"))


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One uninterrupted run of the README's first command (to a temporary output), shared by
    the tests of its outputs (test_cli.py) and of its report.html (test_report_html.py)."""
    out = tmp_path_factory.mktemp("sample") / "out"
    proc = neardup("dedup", "--input", str(SAMPLE), "--output", str(out))
    return out, proc


@pytest.fixture(scope="session")
def chains_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """A hundred documents as Parquet (drifting chains the guard splits, near copies and
    unrelated ones: neardup_testkit.chains) and their brute-force result at the defaults, for
    tests whose property is not the sample's: a crash and its rerun, an installed wheel, a
    DAG (the sample's run is `sample_run`)."""
    table = chains.generate(chains.ChainSpec(chains=4, steps=8, stars=5, singles=30, seed=3))
    path = tmp_path_factory.mktemp("chains") / "chains.parquet"
    pq.write_table(table.select(["id", "text"]), path)
    return path, brute_force(table["id"].to_pylist(), table["text"].to_pylist())


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with neardup's dependencies but no pyspark, packed by venv-pack:
    what the README has a user ship to executors that have only Python (neardup itself goes
    as spark-submit.sh's zip). Built once per stamp of its pins (the package's requirements,
    the interpreter) and kept in the user's cache: a minute and a half of installing with pip,
    seconds with uv (.ci/run's). YARN's tests ship it."""
    # The package's requirements as installed (not its extras); the archive's interpreter is
    # a link to this base interpreter, so its place and version are in the stamp too.
    required = [r for r in importlib.metadata.requires("neardup") or [] if "extra ==" not in r]
    pins = [*required, "venv-pack>=0.2,<1"]
    where = [sys.version, sys.base_prefix, platform.platform()]
    stamp = hashlib.sha256(json.dumps([where, pins]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neardup-tests"
    archive = cache / f"packed-env-{stamp}.tar.gz"
    if archive.exists():
        return archive
    root = tmp_path_factory.mktemp("packed")
    venv = root / "env"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    if os.environ.get("UV"):  # .ci/run's uv: 4 CPU-seconds where pip took 39
        _run([os.environ["UV"], "pip", "install", "--quiet", "--python", python, *pins])
        # Byte-code for what the job's Python processes import, not for every module (22 s
        # more): each executor unpacks a copy of its own, so what it compiles serves it alone.
        _run([python, "-c", "import numba, numpy, pandas, pyarrow.parquet, scipy.sparse.csgraph, yaml"])
    else:
        _run([python, "-m", "pip", "install", "--quiet", *pins])
    packed = root / "neardup-env.tar.gz"
    _run([str(venv / "bin" / "venv-pack"), "-p", str(venv), "-o", str(packed), "-q"])
    cache.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    shutil.copyfile(packed, partial)
    partial.replace(archive)  # whole or absent, even with two test sessions at once
    return archive


@pytest.fixture(scope="session")
def minicluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[yarn.MiniCluster]:
    """Hadoop's minicluster (HDFS and YARN, yarn.py), one per test session. Skipped, saying
    why, where its artifacts cannot be had (unless NEARDUP_REQUIRE_YARN is set: CI fetched
    them); a cluster that does not come up fails with its log's tail. At the end every
    process of it is killed: the JVM and any container still running."""
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    try:
        cp = yarn.classpath()
    except yarn.Unavailable as e:
        if os.environ.get(yarn.REQUIRED_ENV):
            pytest.fail(f"{e} ({yarn.REQUIRED_ENV} is set)", pytrace=False)
        pytest.skip(str(e))
    try:
        cluster = yarn.start(tmp_path_factory.mktemp("minicluster"), cp)
    except yarn.StartFailed as e:
        pytest.fail(str(e), pytrace=False)
    print(f"minicluster: up in {cluster.started_in:.1f} s, {cluster.fs}")
    try:
        yield cluster
    finally:
        leftover = cluster.stop()
        if leftover:
            print(f"minicluster: killed {len(leftover)} container process(es) still running at the end")
