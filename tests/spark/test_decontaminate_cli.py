"""`neardup decontaminate` through the command line's entry (`neardup.cli.main`, in this
process, on the test session) on a planted corpus (JSON Lines, gzip) and evaluation sets
whose columns have other names; a crash after the match stage (the job's own hook raising,
`NEARDUP_FAIL_HOW=raise`, as in test_resume.py) and the rerun that reuses it; exit codes,
one-line errors, the outputs against the brute-force reference, and the accounting of
every input row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from inprocess import Ran, compiled_expressions, neardup
from neardup.cli import main
from neardup.runtime.stagelog import FAULT_ENV, FAULT_HOW_ENV, InjectedCrash
from neardup_testkit.contamination import NEAR, PlantSpec, expected_matches, plant, rejected_ids
from neardup_testkit.synth import write_jsonl_gz

SPEC = PlantSpec(corpus_docs=600, reference_items=30, edited_copies=8, inserted_runs=8, decoys=8, seed=9)


@pytest.fixture(scope="module", autouse=True)
def _compiled(spark: Any) -> Iterator[None]:
    """No process in tests/e2e runs this command: here it runs compiled, as users run it."""
    with compiled_expressions(spark):
        yield


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    p = plant(SPEC)
    root = tmp_path_factory.mktemp("decon-cli")
    corpus = root / "corpus.jsonl.gz"
    write_jsonl_gz(p.corpus, corpus)
    evals = root / "evals"
    evals.mkdir()
    rows = [{"qid": r["id"], "question": r["text"]} for r in p.reference.to_pylist()]
    for name, part in (("mmlu.jsonl", rows[:10]), ("gsm8k.jsonl", rows[10:])):
        (evals / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    docs = dict(zip(p.corpus.column("id").to_pylist(), p.corpus.column("text").to_pylist(), strict=True))
    refs = {r["qid"]: r["question"] for r in rows}
    return {"root": root, "corpus": corpus, "evals": evals, "planted": p, "docs": docs, "refs": refs}


def _args(files: dict[str, Any], out: Path, *more: str) -> list[str]:
    return [
        "decontaminate",
        "--input",
        str(files["corpus"]),
        "--reference",
        str(files["evals"]),
        "--reference-id-col",
        "qid",
        "--reference-text-col",
        "question",
        "--output",
        str(out),
        *more,
    ]


@pytest.fixture
def resumed(
    spark: Any, files: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Ran]:
    """A run that crashes after its match stage, then the rerun that resumes it."""
    out = files["root"] / "out"
    with monkeypatch.context() as crashing:
        crashing.setenv(FAULT_ENV, "match")
        crashing.setenv(FAULT_HOW_ENV, "raise")
        with pytest.raises(InjectedCrash) as crash:
            main(_args(files, out))
    assert crash.value.args == ("match",)
    assert not out.exists(), "a crashed run must not leave output that looks complete"
    work = files["root"] / "out.neardup-staging" / "_work"
    assert [p.name.split("-")[0] for p in work.iterdir() if (p / "_SUCCESS").exists()] == ["matches"]
    return out, neardup(capsys, *_args(files, out))


def test_decontaminate_end_to_end(
    spark: Any, resumed: tuple[Path, Ran], files: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, ran = resumed
    assert ran.code == 0, ran.err[-3000:]
    assert "Traceback" not in ran.err and "stage matches    reusing" in ran.err
    for stage in ("reference", "read", "match", "write", "check"):
        assert f"stage {stage:<10}" in ran.err
    for name in ("kept", "removed", "matches", "rejected", "report.json", "_SUCCESS"):
        assert (out / name).exists(), name
    assert not (files["root"] / "out.neardup-staging").exists()
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == ["matches"]

    # Every match, against the brute-force reference; the planted ones among them, no decoy.
    want = expected_matches(files["docs"], files["refs"], SPEC.ngram, 0.8)
    got = {
        (r["id"], r["reference_id"], r["reason"]): round(r["similarity"], 9)
        if r["reason"] == NEAR
        else r["ngram"]
        for r in pq.read_table(out / "matches").to_pylist()
    }
    assert got == {k: round(v, 9) if isinstance(v, float) else v for k, v in want.items()}
    planted = files["planted"]
    assert planted.truth <= got.keys() and not {d for d, _, _ in got} & planted.decoys

    # Every input row in exactly one of kept/, removed/, rejected/.
    ids = {n: pq.read_table(out / n).column("id").to_pylist() for n in ("kept", "removed", "rejected")}
    assert sorted(ids["kept"] + ids["removed"] + ids["rejected"]) == sorted(files["docs"])
    assert set(ids["removed"]) == {d for d, _, _ in want}
    assert set(ids["rejected"]) == rejected_ids(files["docs"])
    c = report["counts"]
    assert (c["input"], c["kept"], c["removed"], c["rejected"], c["matches"]) == (
        SPEC.corpus_docs,
        len(ids["kept"]),
        len(ids["removed"]),
        len(ids["rejected"]),
        len(want),
    )
    assert report["reference"]["items"] == SPEC.reference_items and report["reference"]["files"] == 2
    assert ran.out.startswith(f"neardup: {SPEC.corpus_docs:,} documents against 30 reference items")
    assert f"Removed {len(ids['removed']):,}: " in ran.out and "matches/" in ran.out

    again = neardup(capsys, *_args(files, out))
    assert again.code == 2
    errors = [line for line in again.err.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1 and "already exists" in errors[0] and "--overwrite" in errors[0]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--set", "decontaminate.max_reference_bytes=4k"],
            2,
            "more than decontaminate.max_reference_bytes = 4k",
        ),
        (["--reference-id-col", "id"], 3, "has no id column 'id'"),
        (["--set", "decontaminate.ngram=0"], 2, "decontaminate.ngram must be in 1..1000"),
    ],
)
def test_errors_are_one_line_with_exit_code(
    spark: Any,
    files: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    code: int,
    message: str,
) -> None:
    ran = neardup(capsys, *_args(files, tmp_path / "o", *args))
    assert ran.code == code, ran.err[-2000:]
    lines = [line for line in ran.err.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and message in lines[0], ran.err[-2000:]
    assert "Traceback" not in ran.err and not (tmp_path / "o").exists()


def test_the_reference_is_required(
    files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An argument error: no session needed (the parser fails before one is asked for).
    ran = neardup(capsys, "decontaminate", "--input", str(files["corpus"]), "--output", str(tmp_path / "o"))
    assert ran.code == 2
    assert "neardup: error: the following arguments are required: --reference" in ran.err
