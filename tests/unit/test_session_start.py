"""What neardup decides before its JVM starts: modules imported in a thread meanwhile
(`preloaded`: ready when it is up; one that fails to import there fails at the caller's
own import, as it would have), and whether the input is small enough for a JVM tuned for
a short run (`small_local_input`, `local_java_options`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from neardup.runtime.session import (
    LONG_RUN_C2,
    SHORT_RUN_C1,
    local_cores,
    local_java_options,
    local_settings,
    preloaded,
    small_local_input,
)


def test_modules_are_imported_in_another_thread_by_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module that records which thread imported it.
    (tmp_path / "preload_mod_a.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    (tmp_path / "preload_mod_b.py").write_text("import preload_mod_a\nVALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("preload_mod_a", "preload_mod_b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with preloaded(["preload_mod_b"]):
        pass
    assert sys.modules["preload_mod_b"].VALUE == 42
    assert sys.modules["preload_mod_a"].THREAD == "neardup-preload"
    assert threading.current_thread().name != "neardup-preload"


def test_a_failing_import_is_left_to_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('broken on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_mod", raising=False)
    with preloaded(["no_such_module_anywhere", "broken_mod"]):
        pass
    assert "broken_mod" not in sys.modules
    with pytest.raises(RuntimeError, match="broken on import"):
        import broken_mod  # noqa: F401


def test_a_function_named_after_the_module_is_called_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "preload_mod_c.py").write_text(
        "import threading\nCALLS = []\n"
        "def warm():\n    CALLS.append(threading.current_thread().name)\n"
        "def broken():\n    raise RuntimeError('left to the caller')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "preload_mod_c", raising=False)
    with preloaded(["preload_mod_c:broken", "preload_mod_c:warm", "preload_mod_c:warm"]):
        pass
    assert sys.modules["preload_mod_c"].CALLS == ["neardup-preload", "neardup-preload"]


def test_nothing_to_load_starts_no_thread() -> None:
    before = threading.active_count()
    with preloaded([]):
        assert threading.active_count() == before


def test_small_local_input_sums_the_files_as_stored(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl.gz"
    one.write_bytes(b"x" * 1000)
    assert small_local_input(str(one), limit=1000)
    assert small_local_input(f"file://{one}", limit=1000)
    assert not small_local_input(str(one), limit=999)
    folder = tmp_path / "parts"
    (folder / "nested").mkdir(parents=True)
    for name, size in [("a.parquet", 400), ("b.parquet", 300), ("nested/c.parquet", 300)]:
        (folder / name).write_bytes(b"y" * size)
    assert small_local_input(str(folder), limit=1000)
    assert not small_local_input(str(folder), limit=999)


def test_small_local_input_is_false_for_what_is_not_a_local_file(tmp_path: Path) -> None:
    assert not small_local_input(str(tmp_path / "missing.parquet"))
    assert not small_local_input("s3a://bucket/corpus/")
    assert not small_local_input("hdfs:///corpus")
    assert not small_local_input("db.table_name")  # a catalog table's name: no such file here


def test_a_small_input_gets_c1_only_and_the_rest_is_kept() -> None:
    usual = ["-XX:+UseParallelGC", "-XX:NewRatio=4", "-XX:+ExitOnOutOfMemoryError"]
    assert local_java_options(small_input=False) == [*usual, *LONG_RUN_C2]
    assert local_java_options(small_input=True) == [*usual, *SHORT_RUN_C1]


def test_a_small_input_runs_without_adaptive_execution_in_a_partition_per_core() -> None:
    assert local_settings(small_input=False, cores=2) == {"spark.sql.shuffle.partitions": "8"}
    assert local_settings(small_input=False, cores=16) == {"spark.sql.shuffle.partitions": "64"}
    assert local_settings(small_input=True, cores=2) == {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.adaptive.enabled": "false",
    }


def test_local_cores_are_the_masters_not_the_machines() -> None:
    machine = os.cpu_count() or 1
    want = {"local": 1, "local[1]": 1, "local[3]": 3, "local[16]": 16, "local[4,2]": 4, "local[*]": machine}
    assert {m: local_cores(m) for m in want} == want
    assert local_cores("local-cluster[2,1,1024]") == machine  # not a form this parses


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not on PATH")
def test_a_short_run_s_jvm_keeps_the_code_cache_of_tiered_compilation() -> None:
    """This machine's java takes the options, and with them a C1-only JVM reserves the code
    cache a tiered one does (by default it reserves a fifth of it: a long-lived session filled
    that and its sweeper took an eighth of its CPU)."""

    def flags(*options: str) -> dict[str, str]:
        cmd = ["java", *options, "-XX:+PrintFlagsFinal", "-version"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
        rows = (line.split() for line in out.splitlines())
        return {f[1]: f[3] for f in rows if len(f) >= 4 and f[2] == "="}

    tiered = flags("-XX:+UseParallelGC")
    short = flags(*local_java_options(small_input=True))
    assert short["TieredStopAtLevel"] == "1" and tiered["TieredStopAtLevel"] == "4"
    assert short["ReservedCodeCacheSize"] == tiered["ReservedCodeCacheSize"]
    c1_default = flags("-XX:TieredStopAtLevel=1")["ReservedCodeCacheSize"]
    assert int(c1_default) < int(short["ReservedCodeCacheSize"])
