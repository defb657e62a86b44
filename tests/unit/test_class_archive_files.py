"""What a local JVM's launch takes from the class archive's folder (runtime/class_archive.py),
and the builder's handling of a dead JVM's class list, on real files. The archive itself,
built and mapped by real JVMs, is tests/e2e/test_class_archive.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.runtime import class_archive as ca

SETTINGS = {"spark.driver.memory": "2g"}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The archive's folder, a Spark home of two jars and a java executable, all made here:
    no JVM, no installed Spark."""
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
    monkeypatch.setenv(ca.ENV, "1")
    monkeypatch.setenv(ca.DIR_ENV, str(tmp_path / "jvm"))
    return tmp_path / "jvm"


def test_without_an_archive_a_run_records_its_classes(cache: Path) -> None:
    plan = ca.plan(SETTINGS)
    assert plan is not None and plan.record is not None
    assert plan.options == (f"-XX:DumpLoadedClassList={plan.record}",)
    assert plan.record.parent == cache and plan.archive == cache / f"{ca.key(SETTINGS)}.jsa"


def test_with_an_archive_a_run_maps_it_quietly(cache: Path) -> None:
    k = ca.key(SETTINGS)
    cache.mkdir(parents=True)
    (cache / f"{k}.jsa").write_bytes(b"archive")
    plan = ca.plan(SETTINGS)
    assert plan == ca.Plan((f"-XX:SharedArchiveFile={cache / f'{k}.jsa'}", *ca.QUIET), cache / f"{k}.jsa")


def test_the_key_follows_the_heap_the_class_path_and_the_jars(cache: Path, tmp_path: Path) -> None:
    keys = [
        ca.key(SETTINGS),
        ca.key({"spark.driver.memory": "64g"}),
        ca.key({**SETTINGS, "spark.driver.extraClassPath": "/opt/extra.jar"}),
    ]
    (tmp_path / "spark" / "jars" / "spark-core.jar").write_bytes(b"another jar")
    keys.append(ca.key(SETTINGS))
    assert len(set(keys)) == 4 and None not in keys
    assert ca.key(dict(SETTINGS)) == keys[-1]


def test_no_key_without_a_java_or_a_spark_home(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "nowhere"))
    assert ca.key(SETTINGS) is None and ca.plan(SETTINGS) is None
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert ca.key(SETTINGS) is None and ca.plan(SETTINGS) is None


def test_a_folder_with_a_space_or_that_cannot_be_made_means_no_archive(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Spark's launcher would split the option at the space.
    monkeypatch.setenv(ca.DIR_ENV, str(tmp_path / "my cache"))
    assert ca.plan(SETTINGS) is None
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(ca.DIR_ENV, str(tmp_path / "a-file" / "jvm"))
    assert ca.plan(SETTINGS) is None


@pytest.mark.parametrize(
    ("env", "key", "options"),
    [
        ("0", ca.EXTRA_JAVA_OPTIONS, ""),
        ("off", ca.EXTRA_JAVA_OPTIONS, ""),
        ("1", ca.EXTRA_JAVA_OPTIONS, "-Xshare:off"),
        ("1", ca.EXTRA_JAVA_OPTIONS, "-XX:SharedArchiveFile=/mine.jsa -Xmx1g"),
        ("1", ca.DEFAULT_JAVA_OPTIONS, "-XX:SharedArchiveFile=/mine.jsa"),
        ("1", "JAVA_TOOL_OPTIONS", "-XX:ArchiveClassesAtExit=/mine.jsa"),
    ],
)
def test_off_by_the_environment_or_the_user_s_own_options(
    cache: Path, monkeypatch: pytest.MonkeyPatch, env: str, key: str, options: str
) -> None:
    assert ca.plan(SETTINGS) is not None
    monkeypatch.setenv(ca.ENV, env)
    if key == "JAVA_TOOL_OPTIONS":
        monkeypatch.setenv(key, options)
        assert ca.plan(SETTINGS) is None
    else:
        assert ca.plan({**SETTINGS, key: options}) is None


def test_a_failed_build_or_a_live_builder_is_not_repeated(cache: Path) -> None:
    k = ca.key(SETTINGS)
    cache.mkdir(parents=True)
    (cache / f"{k}.lock").write_text("")
    assert ca.plan(SETTINGS) is None
    (cache / f"{k}.lock").unlink()
    (cache / f"{k}.failed").write_text("java said no")
    assert ca.plan(SETTINGS) is None


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_failing_dump_leaves_a_marker_and_no_archive(cache: Path, tmp_path: Path) -> None:
    """`java` here is a program that fails; the unfinished last line of the list is dropped
    before it runs, and the list and the lock are gone after."""
    cache.mkdir(parents=True)
    listed = cache / "k.1.classlist"
    listed.write_bytes(b"java/lang/Object id: 0\njava/lang/Str")
    seen = tmp_path / "seen"
    fails = tmp_path / "java"
    fails.write_text(f"#!/bin/sh\ncat {listed} > {seen}\necho no room >&2\nexit 1\n")
    fails.chmod(0o755)
    spec = {
        "pid": _dead_pid(),
        "java": str(fails),
        "class_path": "x.jar",
        "options": [],
        "list": str(listed),
        "archive": str(cache / "k.jsa"),
    }
    assert ca.build(spec) is False
    assert seen.read_bytes() == b"java/lang/Object id: 0\n"
    assert sorted(p.name for p in cache.iterdir()) == ["k.failed"]
    assert (cache / "k.failed").read_bytes() == b"no room\n"


def test_a_dump_is_renamed_into_place_and_old_archives_pruned(cache: Path, tmp_path: Path) -> None:
    """Pruning deletes archives named as neardup names them (<16 hex digits>.jsa) only: a
    folder the user names may hold archives of their own."""
    cache.mkdir(parents=True)
    olds = ["0000000000000001.jsa", "0000000000000002.jsa", "0000000000000003.jsa"]
    for i, name in enumerate(["mine.jsa", *olds]):
        (cache / name).write_bytes(b"old")
        os.utime(cache / name, (1000 + i, 1000 + i))
    listed = cache / "00000000000000aa.1.classlist"
    listed.write_bytes(b"java/lang/Object id: 0\n")
    # A `java` that writes the archive it is asked for, as -Xshare:dump does.
    writes = tmp_path / "java"
    loop = 'for a in "$@"; do case $a in -XX:SharedArchiveFile=*) echo dumped > "${a#*=}";; esac; done'
    writes.write_text(f"#!/bin/sh\n{loop}\n")
    writes.chmod(0o755)
    spec = {
        "pid": _dead_pid(),
        "java": str(writes),
        "class_path": "x.jar",
        "options": ["-Xmx2g"],
        "list": str(listed),
        "archive": str(cache / "00000000000000aa.jsa"),
    }
    assert ca.build(spec) is True
    assert (cache / "00000000000000aa.jsa").read_bytes() == b"dumped\n"
    # KEEP = 3: this key's archive and the two newest others; the user's own is not counted.
    assert sorted(p.name for p in cache.iterdir()) == sorted(["00000000000000aa.jsa", *olds[1:], "mine.jsa"])
