"""survivor.policy priority from the command line (`neardup.cli.main`, in this process, on
the test session): the list given with --set as a YAML flow list, `then: quality`, a JSON
Lines input with null sources and scores; every document's kept document and similarity
against the brute-force reference. And the one-line errors of a list with a repeat and of
a priority column the input does not have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup.cli import main
from neardup_testkit.reference import guarded_clusters
from neardup_testkit.synth import CorpusSpec, generate

# report.html is tested in tests/spark/test_report.py and tests/e2e; here it only costs time.
NO_HTML = ("--set", "report.html=false")
ORDER = ["wikipedia", "books", "web"]
PRIORITY = [
    "--set",
    "survivor.policy=priority",
    "--set",
    "survivor.priority_column=source",
    "--set",
    "survivor.priority=[wikipedia, books, web]",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    table = generate(
        CorpusSpec(num_docs=400, seed=31, mean_chars=300, dup_fraction=0.6, jaccard_range=(0.85, 1))
    )
    rng = np.random.default_rng(3)
    sources = rng.choice(np.array(["wikipedia", "books", "web", "blog", None], dtype=object), len(table))
    quality = [None if rng.random() < 0.1 else q for q in table["quality"].to_pylist()]
    docs = [
        {"id": i, "text": t, "source": s, "quality": q}
        for i, t, s, q in zip(
            table["id"].to_pylist(), table["text"].to_pylist(), sources, quality, strict=True
        )
    ]
    path = tmp_path_factory.mktemp("priority-cli") / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path, docs


def test_priority_then_quality_from_the_command_line(
    spark: Any,
    corpus: tuple[Path, list[dict[str, object]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, docs = corpus
    out = tmp_path / "out"
    then = ["--set", "survivor.then=quality", "--set", "survivor.column=quality"]
    code = main(["dedup", "--input", str(path), "--output", str(out), *PRIORITY, *then, *NO_HTML])
    assert code == 0, capsys.readouterr().err[-3000:]
    place = {v: i for i, v in enumerate(ORDER)}
    by_id = {d["id"]: d for d in docs}

    def order(i: object) -> tuple[object, ...]:
        d = by_id[i]
        q = d["quality"]
        return (place.get(d["source"], len(ORDER)), q is None, -q if isinstance(q, float) else 0, i)

    ids, texts = list(by_id), [str(d["text"]) for d in docs]
    want = guarded_clusters(ids, texts, 0.8, 0.7, rank=order)
    rows = pq.read_table(out / "clusters").to_pylist()
    got = {r["id"]: (r["cluster_id"], r["similarity"]) for r in rows}
    assert {i: (k, None if s is None else round(s, 9)) for i, (k, s) in got.items()} == {
        i: (k, None if s is None else round(s, 9)) for i, (k, s) in want.items()
    }
    # The test can tell: the scores decide between members of the same place in the list.
    by_place_only = guarded_clusters(ids, texts, 0.8, 0.7, rank=lambda i: (*order(i)[:1], i))
    assert sum(want[i][0] != by_place_only[i][0] for i in ids) > 10


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["--set", "survivor.priority=[web, books, web]"],
            "config key survivor.priority lists 'web' more than once",
        ),
        (
            ["--set", "survivor.priority_column=origin"],
            "config key survivor.priority_column names 'origin', which input",
        ),
    ],
)
def test_priority_errors_are_one_line(
    spark: Any,
    corpus: tuple[Path, list[dict[str, object]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sets: list[str],
    message: str,
) -> None:
    args = ["dedup", "--input", str(corpus[0]), "--output", str(tmp_path / "o"), *PRIORITY, *sets, *NO_HTML]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("neardup: error:")]
    assert len(lines) == 1 and message in lines[0], err[-2000:]
    assert "Traceback" not in err
