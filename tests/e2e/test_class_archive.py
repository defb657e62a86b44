"""The class archive (runtime/class_archive.py) built and mapped by real JVMs: a first run
in an empty cache records the classes its JVM loads and leaves a builder behind it; the
archive it dumps is mapped by the next run, whose clusters are the brute-force ones."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from cli_process import ARCHIVE_NOTE, neardup

from brute_force import Result, read_result

SPARK_CLASS = "org.apache.spark.SparkContext source: "


def _where_spark_came_from(log: Path) -> str:
    lines = [line for line in log.read_text().splitlines() if SPARK_CLASS in line]
    assert len(lines) == 1, lines
    return lines[0].split(SPARK_CLASS, 1)[1]


def test_the_second_run_maps_the_classes_the_first_loaded(
    chains_corpus: tuple[Path, Result], tmp_path: Path
) -> None:
    # The classes a JVM loads do not depend on the corpus's size: the tier's hundred documents.
    # The first run stops after reading the input (a run that fails leaves its list too), so
    # the archive holds the start's classes, the ones whose loading it spares; the second
    # runs whole, through classes it holds and classes it does not.
    corpus, want = chains_corpus
    folder = tmp_path / "jvm"
    env = {"NEARDUP_CLASS_ARCHIVE": "1", "NEARDUP_CLASS_ARCHIVE_DIR": str(folder)}

    def run(n: int, code: int = 0, **more: str) -> tuple[Path, list[str]]:
        out, log = tmp_path / f"out{n}", tmp_path / f"classes{n}.log"
        loads = f"spark.driver.extraJavaOptions=-Xlog:class+load=info:file={log}"
        args = ["--input", str(corpus), "--output", str(out), "--set", "report.html=false"]
        proc = neardup("dedup", *args, "--conf", loads, env={**env, **more})
        assert proc.returncode == code, proc.stderr[-3000:]
        return log, [line for line in proc.stderr.splitlines() if "class archive" in line]

    first, said = run(1, 86, NEARDUP_FAIL_AFTER_STAGE="read")
    assert _where_spark_came_from(first).endswith(".jar")
    (note,) = said
    assert re.fullmatch(rf"\d\d:\d\d:\d\d neardup {ARCHIVE_NOTE}", note) and str(folder) in note
    # The builder waits for the first run's JVM to exit, then dumps (about 30 s of CPU), and
    # removes its list, its spec and its lock: the folder holds the archive alone.
    # A bound on the wait (300 polls), not on the time: the dump's speed is not asserted.
    for _ in range(300):
        names = sorted(p.name for p in folder.iterdir())
        failed = list(folder.glob("*.failed"))
        assert not failed, failed[0].read_text(errors="replace")
        if [Path(n).suffix for n in names] == [".jsa"]:
            break
        time.sleep(2)
    assert [Path(n).suffix for n in names] == [".jsa"], names
    second, said = run(2)
    assert _where_spark_came_from(second) == "shared objects file"
    assert said == []
    (archive,) = folder.iterdir()
    report = json.loads((tmp_path / "out2" / "report.json").read_text())
    assert report["spark"]["class_archive"] == {"path": str(archive), "mapped": True}
    assert read_result(tmp_path / "out2") == want
