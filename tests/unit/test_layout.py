"""The package's boundaries: kernels never import pyspark; the numba cache follows the
kernels' sources; the wheel carries the job and nothing else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"
KERNELS = sorted(p.stem for p in (LIB / "neardup" / "kernels").glob("*.py") if p.stem != "__init__")


def _python(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_every_kernel_imports_without_pyspark() -> None:
    assert {"arrow", "hashing", "minhash", "signatures", "buckets", "scoring", "textnorm"} <= set(KERNELS)
    code = (
        "import importlib, json, sys\n"
        f"for name in {KERNELS!r}:\n"
        "    importlib.import_module('neardup.kernels.' + name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))))\n"
    )
    assert json.loads(_python(code)) == []


def test_runtime_rules_import_without_pyspark() -> None:
    code = (
        "import json, sys\n"
        "import neardup.config, neardup.runtime.memory, neardup.runtime.failures, neardup.errors\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pyspark'))))\n"
    )
    assert json.loads(_python(code)) == []


@pytest.mark.slow
def test_an_edited_kernel_dependency_is_never_served_from_a_stale_cache(tmp_path: Path) -> None:
    """numba's own cache would keep minhash's compiled code after an edit of hashing.py
    (it checks only the defining file); the cache directory keyed to every kernel source
    makes the edit take effect."""
    lib = tmp_path / "lib"
    shutil.copytree(LIB / "neardup", lib / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(lib), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    sign = (
        "import pyarrow as pa\n"
        "from neardup.kernels.minhash import signatures, _sign_texts_kernel as k\n"
        "s = signatures(pa.array(['wordsoflength thirteen characters'] * 1), unit='word', ngram=2, "
        "char_ngram=2, num_perm=8, seed=1, method='oph')\n"
        "print(s[0].tolist(), k._cache.cache_path)\n"
    )
    before, cache_before = _python(sign, env, tmp_path).rsplit(" ", 1)
    again, _ = _python(sign, env, tmp_path).rsplit(" ", 1)
    assert again == before  # loaded from the cache, same code
    hashing = lib / "neardup" / "kernels" / "hashing.py"
    text = hashing.read_text()
    edited = text.replace("_MURMUR_ADD = np.uint64(0x52DCE729)", "_MURMUR_ADD = np.uint64(0x52DCE72B)")
    assert edited != text
    hashing.write_text(edited)
    after, cache_after = _python(sign, env, tmp_path).rsplit(" ", 1)
    assert cache_after != cache_before
    assert after != before, "a signature computed by stale compiled code"


def test_every_kernel_takes_njit_from_the_jit_module() -> None:
    """A kernel defined before numba_cache.install() ran would cache by numba's own rules
    (stale code after an edit of a called module, no shipped code): kernel modules import
    njit from neardup.kernels.jit, and numba from nowhere else."""
    for path in sorted((LIB / "neardup" / "kernels").glob("*.py")):
        if path.name in ("jit.py", "numba_cache.py", "precompile.py"):
            continue
        text = path.read_text()
        assert "from numba import" not in text and "import numba" not in text, path.name
        if "@njit" in text:
            assert "from neardup.kernels.jit import njit" in text, path.name


def test_cache_directory_names_the_sources_and_environment_digest(tmp_path: Path) -> None:
    """Every kernel caches in `<NUMBA_CACHE_DIR>/neardup-<key>`, the key a digest of the
    sources and of what compiled code depends on; NUMBA_CACHE_DIR itself is left alone."""
    out = _python(
        "import os, json; from neardup.kernels import numba_cache as c, hashing, minhash\n"
        "print(json.dumps([os.environ['NUMBA_CACHE_DIR'], c.cache_key(), c.sources_digest(),\n"
        "  c.environment(),\n"
        "  hashing._text_hash128_kernel._cache.cache_path, minhash._sign_texts_kernel._cache.cache_path]))\n",
        {"NUMBA_CACHE_DIR": str(tmp_path), "NEARDUP_NUMBA_SHIPPED": "0"},
    )
    base, key, digest, env, *paths = json.loads(out)
    assert base == str(tmp_path) and paths == [str(tmp_path / f"neardup-{key}")] * 2
    assert key != digest and {"numba", "llvmlite", "numpy", "python", "machine"} <= set(env)


# The package's layers, lowest first: a module imports from its own layer or lower ones.
LAYERS = [
    {"neardup", "__version__", "columns", "errors", "private_dir"},
    {"kernels"},
    {"runtime"},
    {"config"},
    {"report"},
    {"stages"},
    {"harness"},
    {"commands"},
    {"cli"},
    {"__main__"},
]


def _layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "neardup"
    return next(i for i, names in enumerate(LAYERS) if name in names)


def _imports(path: Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "neardup":
            if node.module == "neardup":
                found.update(f"neardup.{a.name}" for a in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "neardup")
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((LIB / "neardup").rglob("*.py")):
        parts = path.relative_to(LIB).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_layers_import_only_downwards() -> None:
    """Kernels know nothing of Spark's stages, stages nothing of the commands, and so on: a
    newcomer finds a change's place by its layer."""
    upward = [
        f"{module} imports {target}"
        for module, path in _modules().items()
        for target in _imports(path)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_every_module_has_a_name_of_its_own() -> None:
    """No two modules share a name (a `tune` in two layers was two places to look)."""
    names = [m.rsplit(".", 1)[-1] for m in _modules() if "." in m]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["dedup", "--input", "in.jsonl", "--output", "out"],
        ["index", "build", "--input", "in.jsonl", "--index", "idx"],
        ["decontaminate", "--input", "in.jsonl", "--reference", "ref.jsonl", "--output", "out"],
        ["evaluate", "--output", "out"],
        ["tune", "--input", "in.jsonl"],
    ],
    ids=lambda argv: argv[0],
)
def test_without_pyspark_every_command_says_what_to_install(argv: list[str], tmp_path: Path) -> None:
    """`pip install .` without the spark extra: one line and exit 2, not a traceback. The
    interpreter is told pyspark cannot be imported, as where it is not installed."""
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # import pyspark raises ModuleNotFoundError\n"
        "from neardup.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "neardup: error:" in line or "Traceback" in line]
    assert lines == [
        "neardup: error: pyspark is not installed: pip install 'neardup[spark]' (where Spark is provided, "
        "as on Databricks or a cluster image, install neardup into that Python instead)"
    ], proc.stderr
