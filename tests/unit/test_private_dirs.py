"""The folders neardup caches in and loads code from are this user's alone (neardup/private_dir.py):
numba's cache (loaded with pickle), the JVM's class archive (mapped as code) and its builder's
spec (it names the java run), the JVM's log folder, and the Python daemon's kernels.

Run as root, the hostile folders are real: one another user (uid 65534) made first, one
anyone can write to, a symlink to a folder of an attacker's files. The attacker's numba cache
is genuine compiled code, built here from an edited kernel under the real cache key: loaded,
it changes the kernel's results (`test_the_planted_cache_is_loaded_from_a_folder_that_passes`
shows it does), so a result equal to the plain-Python reference shows it was not loaded.
A folder refused has nothing written into it (its snapshot is unchanged, not one file new),
and the process says so in exactly one warning line.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adversarial import snapshot
from neardup import private_dir
from neardup.kernels import numba_cache
from neardup.runtime import class_archive as ca
from neardup.runtime.session import LOG_DAYS, log_dir
from neardup_testkit import hashspec

pytestmark = pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="only root can make another user's folders"
)

LIB = Path(__file__).resolve().parents[2] / "lib"
OTHER = 65534  # nobody
ME = os.getuid() if hasattr(os, "getuid") else 0
TEXTS = ["the quick brown fox jumps over the lazy dog", "two words", "naïve café 日本語", ""]
SEED, NUM_PERM = 7, 16
WARNING = "warning: not using "

# What a process of the kernels does and did: the text hash (the planted kernel), with
# `daemon` first the Python daemon's preload and then a signing call, and what install() chose.
SCRIPT = f"""
import json, sys
import pyarrow as pa
if sys.argv[1:] == ["daemon"]:
    from neardup.runtime import pydaemon
    pydaemon.preload()
    print("preloaded", flush=True)
from neardup.kernels import numba_cache
from neardup.kernels.hashing import _text_hash128_kernel, text_hash128
out = {{"thash": text_hash128(pa.array({TEXTS!r})).tolist()}}
if sys.argv[1:] == ["daemon"]:
    from neardup.kernels.minhash import signatures
    sig = signatures(pa.array({TEXTS!r}), unit="word", ngram=3, char_ngram=4, num_perm={NUM_PERM},
                     seed={SEED}, method="oph")
    out["sigs"] = sig.tolist()
done = numba_cache.install()
out.update(
    directory=None if done["directory"] is None else str(done["directory"]),
    seeded=done["seeded"],
    hits=sum(_text_hash128_kernel.stats.cache_hits.values()),
    misses=len(_text_hash128_kernel.stats.cache_misses),
)
print(json.dumps(out))
"""

# The plant: the text hash compiled from hashing.py with another constant, cached under the
# key of the unedited sources (numba finds it as it would its own, for the same bytecode).
PLANT = """
import sys
import pyarrow as pa
from neardup.kernels import numba_cache
numba_cache.cache_key = lambda: sys.argv[1]
from neardup.kernels.hashing import text_hash128
text_hash128(pa.array(["x"]))
"""


def _thash_reference() -> list[list[int]]:
    return [[h - (1 << 64) if h >> 63 else h for h in hashspec.text_hash(t)] for t in TEXTS]


def _sigs_reference() -> list[list[int]]:
    rows = []
    for t in TEXTS:
        hashes = [hashspec.shingle_hash(s, SEED) for s in hashspec.shingles(t, "word", 3, 4)]
        rows.append(hashspec.oph(hashes, NUM_PERM, SEED))
    return rows


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "NEARDUP_NUMBA", "XDG_", "TMPDIR"))
    }
    env.update(extra)
    return env


def _copy_lib(dest: Path) -> Path:
    shutil.copytree(
        LIB / "neardup", dest / "neardup", ignore=shutil.ignore_patterns("__pycache__", "_compiled")
    )
    return dest


def _python(code: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _leaf() -> str:
    return f"neardup-{numba_cache.cache_key()}"


@pytest.fixture(scope="module")
def plant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the attacker's numba cache files for the text hash kernel."""
    base = tmp_path_factory.mktemp("plant")
    lib = _copy_lib(base / "lib")
    hashing = lib / "neardup" / "kernels" / "hashing.py"
    text = hashing.read_text()
    edited = text.replace("_MURMUR_ADD = np.uint64(0x52DCE729)", "_MURMUR_ADD = np.uint64(0x52DCE72B)")
    assert edited != text
    hashing.write_text(edited)
    env = _clean_env(PYTHONPATH=str(lib), NUMBA_CACHE_DIR=str(base / "cache"), NEARDUP_NUMBA_SHIPPED="0")
    _python(PLANT, env, numba_cache.cache_key())
    files = base / "cache" / _leaf()
    assert any(p.name.startswith("hashing._text_hash128_kernel-") for p in files.iterdir())
    return files


@pytest.fixture(scope="module")
def shipped_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package whose shipped code (kernels/_compiled) is the text hash, compiled
    here for this host: where a folder passes the checks, it is placed there."""
    base = tmp_path_factory.mktemp("shipped")
    lib = _copy_lib(base / "lib")
    env = _clean_env(PYTHONPATH=str(lib), NUMBA_CACHE_DIR=str(base / "cache"), NEARDUP_NUMBA_SHIPPED="0")
    _python(SCRIPT, env)
    compiled = lib / "neardup" / "kernels" / "_compiled"
    shutil.copytree(base / "cache" / _leaf(), compiled)
    files = sorted(p.name for p in compiled.iterdir())
    manifest = {"key": numba_cache.cache_key(), "targets": [], "files": files}
    (compiled / "manifest.json").write_text(json.dumps(manifest))
    return lib


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A temporary directory like /tmp (sticky, anyone writes), a home cache that cannot be
    made (under a file), an attacker's folder of their own."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    (tmp_path / "a-file").write_text("")
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    return {"tmp": tmp, "home": tmp_path / "a-file" / "cache", "attacker": attacker, "base": tmp_path}


def _run(lib: Path, places: dict[str, Path], *args: str, **env: str) -> tuple[dict[str, Any], list[str], str]:
    """The kernels' process with the home cache unwritable: its output, its warning lines, stdout."""
    full = _clean_env(
        PYTHONPATH=str(lib), TMPDIR=str(places["tmp"]), XDG_CACHE_HOME=str(places["home"]), **env
    )
    proc = _python(SCRIPT, full, *args)
    warnings = [line for line in proc.stderr.splitlines() if WARNING in line]
    return json.loads(proc.stdout.splitlines()[-1]), warnings, proc.stdout


def _chown_tree(root: Path, uid: int) -> None:
    for p in [root, *root.rglob("*")]:
        os.chown(p, uid, -1, follow_symlinks=False)


def _fallback(places: dict[str, Path]) -> Path:
    return places["tmp"] / f"neardup-numba-{ME}"


def _hostile_fallback(kind: str, places: dict[str, Path], plant: Path) -> tuple[Path, str]:
    """Make the fallback folder hostile in one way, the plant inside; (the folder refused, a
    fragment of the reason)."""
    fallback, attacker = _fallback(places), places["attacker"]
    if kind == "another user's":
        fallback.mkdir(mode=0o755)
        shutil.copytree(plant, fallback / _leaf())
        _chown_tree(fallback, OTHER)
        return fallback, f"owned by uid {OTHER}"
    if kind == "writable by others":
        fallback.mkdir()
        fallback.chmod(0o777)  # ours, but anyone could have put the folder below in place
        shutil.copytree(plant, fallback / _leaf())
        (fallback / _leaf()).chmod(0o700)
        return fallback, "mode 0777: its group and others can write to it"
    if kind == "a symlink":
        shutil.copytree(plant, attacker / _leaf())
        _chown_tree(attacker, OTHER)
        fallback.symlink_to(attacker)
        return fallback, f"a symlink (to {attacker})"
    assert kind == "a symlinked child"
    fallback.mkdir(mode=0o700)
    shutil.copytree(plant, attacker / _leaf())
    _chown_tree(attacker, OTHER)
    (fallback / _leaf()).symlink_to(attacker / _leaf())
    return fallback / _leaf(), f"a symlink (to {attacker / _leaf()})"


def test_the_planted_cache_is_loaded_from_a_folder_that_passes(
    plant: Path, shipped_lib: Path, places: dict[str, Path]
) -> None:
    """The control: the plant in a folder of this user's alone is loaded (the hash differs
    from the reference): a result equal to the reference elsewhere means it was not loaded."""
    cache = places["base"] / "numba"
    cache.mkdir(mode=0o700)
    shutil.copytree(plant, cache / _leaf())
    got, warnings, _ = _run(shipped_lib, places, NUMBA_CACHE_DIR=str(cache))
    assert got["directory"] == str(cache / _leaf()) and got["hits"] == 1 and not got["seeded"]
    assert got["thash"] != _thash_reference() and warnings == []


@pytest.mark.parametrize("kind", ["another user's", "writable by others", "a symlink", "a symlinked child"])
def test_a_hostile_fallback_folder_is_neither_read_nor_written(
    kind: str, plant: Path, shipped_lib: Path, places: dict[str, Path]
) -> None:
    """The home cache cannot be written, so the fallback under the temporary directory is
    the place; someone made it first: the kernels compile in memory, give the reference's
    hashes (the plant unread), nothing shipped is placed, nothing is written there, and one
    warning names the folder and what is wrong."""
    refused, reason = _hostile_fallback(kind, places, plant)
    before = snapshot(places["tmp"], places["attacker"])
    got, warnings, _ = _run(shipped_lib, places)
    assert got["thash"] == _thash_reference()
    assert got["directory"] is None and not got["seeded"] and got["hits"] == 0 and got["misses"] == 1
    assert snapshot(places["tmp"], places["attacker"]) == before
    assert len(warnings) == 1, warnings
    assert f"{WARNING}{refused} for the kernels' compiled code: {reason}" in warnings[0]


def test_a_fresh_fallback_folder_is_made_private_and_used(shipped_lib: Path, places: dict[str, Path]) -> None:
    """The good path: the fallback made now, mode 0700, the shipped code placed there and
    loaded (nothing compiled), the reference's hashes, no warning."""
    got, warnings, _ = _run(shipped_lib, places)
    leaf = _fallback(places) / _leaf()
    assert got["directory"] == str(leaf) and got["seeded"] and got["hits"] == 1 and got["misses"] == 0
    assert got["thash"] == _thash_reference() and warnings == []
    for folder in (_fallback(places), leaf):
        st = folder.lstat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == ME
    assert sorted(p.name for p in leaf.iterdir()) == sorted(
        p.name for p in (shipped_lib / "neardup" / "kernels" / "_compiled").iterdir() if p.suffix != ".json"
    )


def test_the_python_daemon_preloads_and_signs_without_a_hostile_cache(
    plant: Path, shipped_lib: Path, places: dict[str, Path]
) -> None:
    """runtime/pydaemon.py's preload (Spark's workers fork from it): with the fallback a
    symlink to the attacker's folder, it loads nothing from there, writes nothing on stdout
    (the daemon's port goes there), and signing in memory gives the reference's signatures."""
    refused, reason = _hostile_fallback("a symlink", places, plant)
    before = snapshot(places["tmp"], places["attacker"])
    got, warnings, stdout = _run(shipped_lib, places, "daemon")
    assert stdout.splitlines()[0] == "preloaded"
    assert got["sigs"] == _sigs_reference() and got["thash"] == _thash_reference()
    assert got["directory"] is None and snapshot(places["tmp"], places["attacker"]) == before
    assert (
        len(warnings) == 1 and f"{WARNING}{refused} for the kernels' compiled code: {reason}" in warnings[0]
    )


# ---------------------------------------------------------------------------------------------
# Where the numba cache goes, in this process (usable_cache_dir decides; nothing compiles).


@pytest.fixture
def numba_env(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.delenv(numba_cache.ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(places["tmp"]))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setenv("XDG_CACHE_HOME", str(places["base"] / "home-cache"))
    return places


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _private(folder: Path) -> bool:
    st = folder.lstat()
    return stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == ME


def test_the_home_cache_is_made_private(numba_env: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    home = numba_env["base"] / "home-cache"
    assert numba_cache.usable_cache_dir() == home / "numba" / _leaf()
    assert _private(home) and _private(home / "numba") and _private(home / "numba" / _leaf())
    assert _warnings(caplog) == []


def test_a_home_cache_of_another_user_falls_back_to_a_private_folder(
    numba_env: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Refused (one warning), not read; the fallback under the temporary directory is used."""
    numba = numba_env["base"] / "home-cache" / "numba"
    numba.mkdir(parents=True)
    os.chown(numba, OTHER, -1)
    before = snapshot(numba)
    assert numba_cache.usable_cache_dir() == _fallback(numba_env) / _leaf()
    assert snapshot(numba) == before and _private(_fallback(numba_env))
    (line,) = _warnings(caplog)
    assert f"{WARNING}{numba} for the kernels' compiled code: owned by uid {OTHER}" in line


@pytest.mark.parametrize(
    ("made", "used", "reason"),
    [
        ("missing", True, None),  # made, mode 0700
        ("0755 mine", True, None),
        ("1777 root's", True, None),  # sticky, as /tmp: no one can rename our folder away
        ("symlink to 0700 mine", True, None),  # the user named it: followed
        ("0777 mine", False, "mode 0777: others can write to it and it has no sticky bit"),
        ("0755 another user's", False, f"owned by uid {OTHER}"),
        ("symlink of another user's", False, f"a symlink owned by uid {OTHER}"),
    ],
)
def test_numba_cache_dir_named_by_the_user(
    made: str,
    used: bool,
    reason: str | None,
    numba_env: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NUMBA_CACHE_DIR is the user's choice (a symlink to another disk, a shared sticky
    folder): followed, and used if no one else can replace what neardup puts in it; the
    folder neardup makes there is 0700 and fully checked."""
    named = numba_env["base"] / "named"
    if made.startswith("symlink"):
        real = numba_env["base"] / "real"
        real.mkdir(mode=0o700)
        named.symlink_to(real)
        if "another" in made:
            os.chown(named, OTHER, -1, follow_symlinks=False)
    elif made != "missing":
        mode, owner = made.split(" ", 1)
        named.mkdir()
        named.chmod(int(mode, 8))
        os.chown(named, OTHER if owner == "another user's" else 0, -1)
    monkeypatch.setenv(numba_cache.ENV, str(named))
    got = numba_cache.usable_cache_dir()
    if used:
        assert got == named / _leaf() and _private(named / _leaf()) and _warnings(caplog) == []
        assert made != "missing" or _private(named)
    else:
        assert got == _fallback(numba_env) / _leaf() and not (named / _leaf()).exists()
        (line,) = _warnings(caplog)
        assert f"{WARNING}{named} for the kernels' compiled code: {reason}" in line


def test_one_warning_per_folder_and_process(
    numba_env: dict[str, Path], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fallback = _fallback(numba_env)
    fallback.mkdir()
    os.chown(fallback, OTHER, -1)
    monkeypatch.setenv("XDG_CACHE_HOME", str(numba_env["home"]))  # unwritable: the fallback is tried
    assert numba_cache.usable_cache_dir() is None and numba_cache.usable_cache_dir() is None
    assert len(_warnings(caplog)) == 1


# ---------------------------------------------------------------------------------------------
# The class archive: its folder, its builder's spec, its cleaning up.

SETTINGS = {"spark.driver.memory": "2g"}


@pytest.fixture
def jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A Spark home of two jars and a java executable, made here (no JVM); the archive's
    folder in the default place, under XDG_CACHE_HOME."""
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "py4j.jar"):
        (home / "jars" / name).write_bytes(b"jar")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.delenv(ca.DIR_ENV, raising=False)
    monkeypatch.setenv(ca.ENV, "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    yield {
        "cache": tmp_path / "cache",
        "folder": tmp_path / "cache" / "neardup" / "jvm",
        "attacker": attacker,
    }


def test_the_archive_folder_is_made_private(jvm: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    plan = ca.plan(SETTINGS)
    assert plan is not None and plan.record is not None and plan.record.parent == jvm["folder"]
    assert _private(jvm["cache"] / "neardup") and _private(jvm["folder"]) and _warnings(caplog) == []


@pytest.mark.parametrize("kind", ["another user's", "writable by others", "a symlink", "a symlinked parent"])
def test_a_hostile_archive_folder_is_never_mapped(
    kind: str, jvm: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """An archive planted under this run's key is not handed to the JVM (no -XX option at
    all: no archive mapped, no class list written there), and one warning names the folder."""
    k = ca.key(SETTINGS)
    folder, attacker = jvm["folder"], jvm["attacker"]
    (attacker / f"{k}.jsa").write_bytes(b"the attacker's code")
    os.chown(attacker / f"{k}.jsa", OTHER, -1)
    folder.parent.mkdir(parents=True, mode=0o700)
    if kind == "another user's":
        shutil.copytree(attacker, folder)
        _chown_tree(folder, OTHER)
        refused, reason = folder, f"owned by uid {OTHER}"
    elif kind == "writable by others":
        shutil.copytree(attacker, folder)
        folder.chmod(0o777)
        refused, reason = folder, "mode 0777"
    elif kind == "a symlink":
        folder.symlink_to(attacker)
        refused, reason = folder, "a symlink"
    else:
        folder.parent.rmdir()
        (attacker / "jvm").mkdir()
        os.rename(attacker / f"{k}.jsa", attacker / "jvm" / f"{k}.jsa")
        folder.parent.symlink_to(attacker)
        refused, reason = folder.parent, "a symlink"
    before = snapshot(jvm["cache"], attacker)
    assert ca.plan(SETTINGS) is None
    assert snapshot(jvm["cache"], attacker) == before
    (line,) = _warnings(caplog)
    assert f"{WARNING}{refused} for the JVM's class archive: {reason}" in line


@pytest.mark.parametrize(
    ("made", "used"), [("missing", True), ("0700", True), ("0755", True), ("0775", False), ("symlink", True)]
)
def test_the_archive_folder_named_by_the_user(
    made: str,
    used: bool,
    jvm: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NEARDUP_CLASS_ARCHIVE_DIR is the folder the archive is mapped from: checked as fully
    as one neardup names (no group or other write), except that a symlink is followed."""
    named = jvm["cache"].parent / "named"
    if made == "symlink":
        real = jvm["cache"].parent / "real"
        real.mkdir(mode=0o700)
        named.symlink_to(real)
    elif made != "missing":
        named.mkdir()
        named.chmod(int(made, 8))
    monkeypatch.setenv(ca.DIR_ENV, str(named))
    plan = ca.plan(SETTINGS)
    if used:
        assert plan is not None and plan.record is not None and plan.record.parent == named
        assert _warnings(caplog) == [] and (made != "missing" or _private(named))
    else:
        assert plan is None and list(named.iterdir()) == []
        (line,) = _warnings(caplog)
        assert f"{WARNING}{named} for the JVM's class archive: mode 0775: its group can write to it" in line


def _builder_spec(folder: Path, tmp_path: Path, archive: Path | None = None) -> tuple[Path, Path]:
    """A spec as build_after_exit writes it, for a `java` that leaves a mark when run; (the
    spec, the mark)."""
    k = "00000000000000ab"
    listed = folder / f"{k}.1.classlist"
    listed.write_bytes(b"java/lang/Object id: 0\n")
    mark = tmp_path / "java-ran"
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\ntouch {mark}\n")
    java.chmod(0o755)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    spec = {
        "pid": dead.pid,
        "java": str(java),
        "class_path": "x.jar",
        "options": [],
        "list": str(listed),
        "archive": str(archive or folder / f"{k}.jsa"),
    }
    path = listed.with_suffix(".spec")
    path.write_text(json.dumps(spec))
    return path, mark


@pytest.mark.parametrize(
    "kind", ["private", "writable by others", "another user's spec", "names another folder"]
)
def test_the_builder_runs_only_a_spec_from_a_private_folder(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The detached builder (`python -m neardup.runtime.class_archive SPEC`) runs the java its
    spec names: a spec that someone else could have written or that points outside its
    folder runs nothing and is left where it is."""
    folder = tmp_path / "jvm"
    folder.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    spec, mark = _builder_spec(
        folder, tmp_path, elsewhere / "00000000000000ab.jsa" if kind == "names another folder" else None
    )
    if kind == "writable by others":
        folder.chmod(0o777)
    elif kind == "another user's spec":
        os.chown(spec, OTHER, -1)
    before = snapshot(folder)
    ran = ca.build_from(spec)
    assert ran is False  # the `java` here writes no archive: a build that runs fails
    if kind == "private":
        assert mark.exists() and not spec.exists() and (folder / "00000000000000ab.failed").exists()
        return
    assert not mark.exists() and list(elsewhere.iterdir()) == []
    if kind == "names another folder":
        assert sorted(snapshot(folder)) == sorted(
            k for k in before if k != str(spec)
        )  # the spec read, deleted
        return
    assert snapshot(folder) == before
    (line,) = _warnings(caplog)
    reason = "mode 0777" if kind == "writable by others" else f"owned by uid {OTHER}"
    assert (
        f"{WARNING}{folder if kind == 'writable by others' else spec} for the JVM's class archive: {reason}"
        in line
    )


def test_cleaning_up_deletes_only_what_the_builder_names(
    jvm: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the user names may hold their own files: old class lists, specs and
    half-written archives are deleted by neardup's names only (<key>.<pid>.classlist ...),
    never a symlink named so nor what it points to."""
    named = jvm["cache"].parent / "named"
    named.mkdir(mode=0o700)
    monkeypatch.setenv(ca.DIR_ENV, str(named))
    outside = jvm["attacker"] / "precious"
    outside.write_text("x")
    ours = [
        named / "00000000000000ab.12.classlist",
        named / "00000000000000ab.12.spec",
        named / "00000000000000ab.12.tmp",
    ]
    theirs = [
        named / "notes.tmp",
        named / "x.classlist",
        named / "run.spec",
        named / "00000000000000ab.jsa.tmp",
    ]
    for p in (*ours, *theirs):
        p.write_text("x")
    (named / "00000000000000cd.13.tmp").symlink_to(outside)
    day = time.time() - 2 * ca.LIST_STALE_S
    for p in named.iterdir():
        os.utime(p, (day, day), follow_symlinks=False)
    assert ca.plan(SETTINGS) is not None
    left = sorted(p.name for p in named.iterdir())
    assert [p for p in ours if p.name in left] == []
    assert {p.name for p in theirs} | {"00000000000000cd.13.tmp"} <= set(left) and outside.read_text() == "x"


# ---------------------------------------------------------------------------------------------
# The JVM's log folder.


@pytest.mark.parametrize("kind", ["another user's", "writable by others", "a symlink"])
def test_a_hostile_log_folder_is_not_used_nor_cleaned(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Logs then go to the temporary directory itself (mkstemp's private files); the folder's
    files, even an old one named as neardup's logs, stay; one warning names it."""
    user = log_dir(tmp_path / "probe")
    assert user is not None
    folder = tmp_path / user.name
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "spark-20260101-000000-abcdefgh.log").write_text("not neardup's")
    old = time.time() - 2 * LOG_DAYS * 86400
    os.utime(attacker / "spark-20260101-000000-abcdefgh.log", (old, old))
    if kind == "a symlink":
        folder.symlink_to(attacker)
        reason = "a symlink"
    else:
        shutil.copytree(attacker, folder)
        if kind == "another user's":
            _chown_tree(folder, OTHER)
            reason = f"owned by uid {OTHER}"
        else:
            folder.chmod(0o777)
            reason = "mode 0777"
    before = snapshot(folder, attacker)
    assert log_dir(tmp_path) is None
    assert snapshot(folder, attacker) == before
    (line,) = _warnings(caplog)
    assert f"{WARNING}{folder} for the JVM's log: {reason}" in line


# ---------------------------------------------------------------------------------------------
# The check itself, on the cases the callers above do not reach.


def test_private_dir_refuses_a_level_that_is_not_a_folder_and_cannot_make_one_under_a_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(private_dir.NotPrivate, match="not a folder"):
        private_dir.private_dir(tmp_path, ("file",))
    with pytest.raises(OSError):
        private_dir.private_dir(tmp_path / "file" / "below", ("x",))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(private_dir.NotPrivate, match="a symlink to nothing"):
        private_dir.private_dir(tmp_path / "dangling", ("x",))
    assert not (tmp_path / "nowhere").exists()
