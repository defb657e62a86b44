"""A rerun after a crash resumes from the stages that finished, driven through the command
line's entry in this process (`neardup.cli.main` on the test session). The crash is the
job's own hook (`NEARDUP_FAIL_AFTER_STAGE`) raising instead of exiting
(`NEARDUP_FAIL_HOW=raise`): the same _work/ left behind. A real driver killed with SIGKILL
after a stage, and the rerun that resumes it in another deploy mode, with _work/ on HDFS,
are tests/e2e/test_yarn.py's.

The corpus: a small generated one with a page copied into an LSH bucket of more than
lsh.all_pairs_up_to documents, so that the candidates stage leaves star edges too. What a
resumed run writes is compared with the brute-force reference (exact Jaccard of every similar
pair, the guard in plain Python), which an uninterrupted run of this corpus equals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from brute_force import Result, brute_force, read_result
from neardup.cli import main
from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash
from neardup_testkit.skew import SkewSpec, skewed_batches
from neardup_testkit.synth import CorpusSpec

NO_HTML = ("--set", "report.html=false")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """The input (three files) and the brute-force result, each document's kept one, status
    and similarity (defaults: threshold 0.8, guard 0.7, survivor longest)."""
    base = CorpusSpec(num_docs=240, seed=13, mean_chars=400, dup_fraction=0.5)
    skew = SkewSpec(copies=80, clusters=2, cluster_size=12)
    table = pa.Table.from_batches(list(skewed_batches(base, skew)))
    root = tmp_path_factory.mktemp("resume") / "in"
    root.mkdir()
    step = -(-table.num_rows // 3)
    for i in range(3):
        pq.write_table(table.slice(i * step, step).select(["id", "text"]), root / f"part-{i}.parquet")
    return root, brute_force(table["id"].to_pylist(), table["text"].to_pylist())


@pytest.mark.parametrize(
    ("crash_after", "finished"),
    [
        ("candidates", ["candidates", "signatures", "star_edges"]),
        ("verify", ["candidates", "edges", "signatures", "star_edges"]),
    ],
)
def test_rerun_after_a_crash_resumes_from_finished_stages(
    spark: Any,
    corpus: tuple[Path, Result],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    crash_after: str,
    finished: list[str],
) -> None:
    inp, want = corpus
    out = tmp_path / "out"
    args = ["dedup", "--input", str(inp), "--output", str(out), *NO_HTML]
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
    assert report["stars"]["star_edges"] > 0  # the reused candidates stage's star edges
    assert read_result(out) == want
    assert not (tmp_path / "out.neardup-staging").exists() and not (out / "_work").exists()


def test_finished_stages_of_other_signing_parameters_are_not_reused(
    spark: Any,
    corpus: tuple[Path, Result],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Signatures of another seed, left by a crash, are neither reused nor mixed in: the
    run of the asked seed signs again, and its own crash's signatures are what the rerun
    resumes from."""
    inp, want = corpus
    out = tmp_path / "out"
    args = ["dedup", "--input", str(inp), "--output", str(out), *NO_HTML]
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
    assert read_result(out) == want
