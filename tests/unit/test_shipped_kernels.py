"""The compiled kernels the wheel ships (kernels/numba_cache.py, kernels/precompile.py): a
new machine's empty cache loads them and compiles nothing, from installed files and from a
zip alike; shipped code of another key (other sources, another numba or Python) is never
used, the kernels compile instead, and every output is the plain-Python reference's."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import script_module
from neardup.kernels import numba_cache, precompile
from neardup_testkit import hashspec

LIB = Path(__file__).resolve().parents[2] / "lib"
M64 = hashspec.M64

# Already normalized (the references shingle normalized text): word shingles, the character
# fallback of a short text, multi-byte characters, an empty text.
TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "the quick brown fox jumps over the sleepy dog",
    "two words",
    "naïve café 日本語 text here",
    "",
]
RAW = ["  The QUICK brown\tfox  ", "a\n\nb", "", "Plain"]  # normalize: ASCII fast path
SEED, NUM_PERM, BANDS, ROWS = 7, 32, 8, 4

# Run in a process of its own: what the kernels return and what numba did. With the argument
# `signing`, the signatures and band keys too: loaded from shipped code they cost nothing, but
# compiled they are most of the kernels' compile time (the tests where shipped code must not
# be used compile the text hash and normalization only, which shows the same).
SCRIPT = f"""
import json, sys
import numpy as np
import pyarrow as pa
from numba.core.registry import CPUDispatcher
from neardup.kernels import numba_cache
from neardup.kernels.hashing import text_hash128
from neardup.kernels.textnorm import normalize

texts = pa.array({TEXTS!r})
out = {{}}
if sys.argv[1:] == ["signing"]:
    from neardup.kernels.minhash import band_keys, signatures
    out.update(sigs={{}}, bands={{}})
    for method in ("oph", "classic"):
        sig = signatures(
            texts, unit="word", ngram=3, char_ngram=4, num_perm={NUM_PERM}, seed={SEED}, method=method
        )
        out["sigs"][method] = sig.tolist()
        out["bands"][method] = band_keys(sig, {BANDS}, {ROWS}, {SEED}).tolist()
out["thash"] = text_hash128(texts).tolist()
out["norm"] = normalize(pa.array({RAW!r})).to_pylist()
hits, misses = 0, []
for name, module in list(sys.modules.items()):
    if name.startswith("neardup.kernels."):
        for f in vars(module).values():
            if isinstance(f, CPUDispatcher):
                hits += sum(f.stats.cache_hits.values())
                misses += [f"{{f.__name__}}{{s}}" for s in f.stats.cache_misses]
done = numba_cache.install()
out.update(hits=hits, misses=misses, seeded=done["seeded"], target=done["target"])
print(json.dumps(out))
"""


def _reference() -> dict[str, Any]:
    sigs, bands = {}, {}
    for method, sign in (("oph", hashspec.oph), ("classic", hashspec.classic)):
        rows = []
        for t in TEXTS:
            hashes = [hashspec.shingle_hash(s, SEED) for s in hashspec.shingles(t, "word", 3, 4)]
            rows.append(sign(hashes, NUM_PERM, SEED))
        sigs[method] = rows
        bands[method] = [hashspec.band_keys(r, BANDS, ROWS, SEED) for r in rows]  # int64, as the kernel's
    thash = [[h - (1 << 64) if h >> 63 else h for h in hashspec.text_hash(t)] for t in TEXTS]
    norm = [" ".join(t.lower().split()) for t in RAW]
    return {"sigs": sigs, "bands": bands, "thash": thash, "norm": norm}


def _run(pythonpath: Path, cache: Path, signing: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "NEARDUP_NUMBA"))}
    env.update(PYTHONPATH=str(pythonpath), NUMBA_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-c", SCRIPT, *(["signing"] if signing else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _outputs(got: dict[str, Any]) -> dict[str, Any]:
    return {k: got[k] for k in ("sigs", "bands", "thash", "norm") if k in got}


def _copy_lib(dest: Path) -> Path:
    shutil.copytree(
        LIB / "neardup", dest / "neardup", ignore=shutil.ignore_patterns("__pycache__", "_compiled")
    )
    return dest


@pytest.fixture(scope="module")
def shipped_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with its kernels compiled for the baseline CPU (any x86-64 or
    other host runs it), as the wheel ships them."""
    lib = _copy_lib(tmp_path_factory.mktemp("shipped"))
    precompile.build(lib / "neardup" / "kernels" / "_compiled", ("generic",), lib)
    return lib


def test_an_empty_cache_loads_the_shipped_code_and_compiles_nothing(
    shipped_lib: Path, tmp_path: Path
) -> None:
    manifest = json.loads((shipped_lib / "neardup" / "kernels" / "_compiled" / "manifest.json").read_text())
    assert manifest["targets"] == ["generic"] and manifest["files"]
    got = _run(shipped_lib, tmp_path / "cache")
    assert got["seeded"] and got["target"] == "generic"
    assert got["misses"] == [] and got["hits"] >= 4
    assert _outputs(got) == _reference()
    # The next process finds the cache in place: loads again, copies nothing.
    again = _run(shipped_lib, tmp_path / "cache")
    assert not again["seeded"] and again["misses"] == [] and _outputs(again) == _reference()


def test_kernels_imported_from_a_zip_load_the_shipped_code(shipped_lib: Path, tmp_path: Path) -> None:
    """As spark-submit.sh ships the package (scripts/build_zip.py --compiled, for
    --py-files): the shipped files are read out of the zip into the cache directory."""
    archive = tmp_path / "neardup.zip"
    compiled = shipped_lib / "neardup" / "kernels" / "_compiled"
    script_module.load("build_zip").build_zip(str(archive), str(shipped_lib), str(compiled))
    names = zipfile.ZipFile(archive).namelist()
    assert "neardup/kernels/_compiled/manifest.json" in names and "neardup/kernels/hashing.py" in names
    got = _run(archive, tmp_path / "cache")
    assert got["seeded"] and got["misses"] == [] and _outputs(got) == _reference()


def test_shipped_code_of_another_key_is_never_used(shipped_lib: Path, tmp_path: Path) -> None:
    """A manifest naming another key (compiled by another numba, Python or machine, or from
    other sources): nothing is copied, the kernels compile, the outputs are the reference's."""
    lib = tmp_path / "foreign"
    shutil.copytree(shipped_lib, lib)
    path = lib / "neardup" / "kernels" / "_compiled" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "key": "0" * 16}))
    got = _run(lib, tmp_path / "cache", signing=False)
    assert not got["seeded"] and got["target"] is None  # the host's own CPU, as without shipped code
    assert got["misses"] and got["hits"] == 0
    want = _reference()
    assert _outputs(got) == {"thash": want["thash"], "norm": want["norm"]}


def test_an_edited_kernel_source_never_runs_the_shipped_code(shipped_lib: Path, tmp_path: Path) -> None:
    """The shipped files (compiled from the unedited sources) are still there, manifest and
    all: the edited sources' key differs, so the edit's code runs."""
    lib = tmp_path / "edited"
    shutil.copytree(shipped_lib, lib)
    hashing = lib / "neardup" / "kernels" / "hashing.py"
    text = hashing.read_text()
    edited = text.replace("_MURMUR_ADD = np.uint64(0x52DCE729)", "_MURMUR_ADD = np.uint64(0x52DCE72B)")
    assert edited != text
    hashing.write_text(edited)
    got = _run(lib, tmp_path / "cache", signing=False)
    assert not got["seeded"] and got["misses"]
    want = _reference()
    assert got["norm"] == want["norm"]
    assert got["thash"] != want["thash"], "a text hash computed by the shipped, unedited code"


def test_a_level_this_cpu_lacks_is_refused_and_left_out_of_the_default(tmp_path: Path) -> None:
    """Precompiling runs what it compiles: for a level the CPU lacks, its process died of an
    illegal instruction and took the wheel's build with it (a machine without AVX-512)."""
    if platform.machine().lower() not in numba_cache.X86_64:
        pytest.skip("the x86-64 levels are built on x86-64 only")
    lacking = [t for t in precompile.X86_TARGETS if not numba_cache.runs_here(t)]
    if not lacking:
        pytest.skip("this CPU runs every x86-64 level precompile builds")
    out = tmp_path / "_compiled"
    with pytest.raises(RuntimeError, match=f"cannot precompile for {lacking[0]} on this machine"):
        precompile.build(out, (lacking[0], "generic"), _copy_lib(tmp_path / "lib"))
    assert not out.exists()
    runnable = tuple(t for t in precompile.X86_TARGETS if t not in lacking)
    assert precompile.default_targets() == runnable


def test_a_build_reuses_code_compiled_before_only_under_its_own_key(
    shipped_lib: Path, tmp_path: Path
) -> None:
    """`--reuse DIR` (setup.py's NEARDUP_PRECOMPILED): DIR holds this key's code for the
    targets, so it is copied and nothing compiles; of another key or other targets, it is not."""
    compiled = shipped_lib / "neardup" / "kernels" / "_compiled"
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "neardup.kernels.precompile", str(out), "--targets", "generic"]
    env = {**os.environ, "PYTHONPATH": str(shipped_lib)}
    proc = subprocess.run(
        [*cmd, "--reuse", str(compiled)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("precompile: copied "), proc.stdout
    files = sorted(p.name for p in compiled.iterdir())
    assert sorted(p.name for p in out.iterdir()) == files
    assert all((out / n).read_bytes() == (compiled / n).read_bytes() for n in files)

    foreign = tmp_path / "foreign"
    shutil.copytree(compiled, foreign)
    manifest = json.loads((foreign / "manifest.json").read_text())
    (foreign / "manifest.json").write_text(json.dumps({**manifest, "key": "0" * 16}))
    assert not precompile._copy_if_current(foreign, tmp_path / "not-copied", ("generic",))
    assert not precompile._copy_if_current(compiled, tmp_path / "not-copied", ("x86-64-v3", "generic"))
    assert not (tmp_path / "not-copied").exists()
