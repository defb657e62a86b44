"""A rerun after a crash resumes from the stages that finished, driven through the command
line's entry in this process (`neardup.cli.main` on the test session). The crash is the
job's own hook (`NEARDUP_FAIL_AFTER_STAGE`) raising instead of exiting
(`NEARDUP_FAIL_HOW=raise`): the same _work/ left behind. A real process killed after a
stage, and the rerun's stderr, are tests/e2e/test_cli.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from neardup.cli import main
from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "corpus.jsonl.gz"
NO_HTML = ("--set", "report.html=false")


def _rows(out: Path) -> list[dict[str, object]]:
    return sorted(pq.read_table(out / "clusters").to_pylist(), key=lambda r: str(r["id"]))


@pytest.fixture(scope="module")
def whole(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """clusters/ of an uninterrupted run of the sample."""
    out = tmp_path_factory.mktemp("whole") / "out"
    assert main(["dedup", "--input", str(SAMPLE), "--output", str(out), *NO_HTML]) == 0
    return _rows(out)


@pytest.mark.compat  # .ci/spark35 runs it on Spark 3.5 too
@pytest.mark.parametrize(
    ("crash_after", "finished"),
    [
        ("candidates", ["candidates", "signatures", "star_edges"]),
        ("verify", ["candidates", "edges", "signatures", "star_edges"]),
    ],
)
def test_rerun_after_a_crash_resumes_from_finished_stages(
    spark: Any,
    whole: list[dict[str, object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    crash_after: str,
    finished: list[str],
) -> None:
    out = tmp_path / "out"
    args = ["dedup", "--input", str(SAMPLE), "--output", str(out), *NO_HTML]
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, crash_after)
        crashing.setenv(FAULT_HOW_ENV, "raise")
        with pytest.raises(InjectedCrash):
            main(args)
    assert not out.exists(), "a crashed run must not leave output that looks complete"
    staging = tmp_path / "out.neardup-staging" / "_work"
    assert sorted(p.name.split("-")[0] for p in staging.iterdir() if (p / "_SUCCESS").exists()) == finished

    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["resumed_stages"]) == finished
    assert _rows(out) == whole
    assert not (tmp_path / "out.neardup-staging").exists() and not (out / "_work").exists()


def test_finished_stages_of_other_signing_parameters_are_not_reused(
    spark: Any,
    whole: list[dict[str, object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Signatures of another seed, left by a crash, are neither reused nor mixed in: the
    run of the asked seed signs again, and its own crash's signatures are what the rerun
    resumes from."""
    out = tmp_path / "out"
    args = ["dedup", "--input", str(SAMPLE), "--output", str(out), *NO_HTML]
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, "sign")
        crashing.setenv(FAULT_HOW_ENV, "raise")
        for seed in ("7", None):
            with pytest.raises(InjectedCrash):
                main([*args, *(("--set", f"minhash.seed={seed}") if seed else ())])
            assert "reusing" not in capsys.readouterr().err
    assert main(args) == 0
    assert "stage signatures reusing" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == ["signatures"]
    assert _rows(out) == whole
