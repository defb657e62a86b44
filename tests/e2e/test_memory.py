"""Memory on real text: a heavy-tailed corpus in a 1 GB heap, and a clear error when the
heap is exhausted (issue: memory-safe on real text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from heavy import HeavyCorpus, check_clusters, long_documents_jsonl
from test_cli import neardup

pytestmark = pytest.mark.slow


def test_heavy_tailed_corpus_in_a_1g_heap(heavy_corpus: HeavyCorpus, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = neardup(
        "dedup",
        "--input",
        str(heavy_corpus.path),
        "--output",
        str(out),
        "--master",
        "local[2]",
        "--conf",
        "spark.driver.memory=1g",
        # The ground truth here is connected components, so the guard only scores (its
        # splits are checked against its own reference in tests/spark/test_guard.py).
        "--set",
        "guard.enabled=false",
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "JVM heap 1g (spark.driver.memory)" in proc.stderr.splitlines()[0]
    report = json.loads((out / "report.json").read_text())
    memory = report["memory"]
    # Long documents: bounded in bytes, far fewer rows than Spark's 2048/4096 defaults.
    assert memory["arrow_rows"] < 400 and not memory["vectorized_reader"], memory
    assert report["counts"]["input"] == len(heavy_corpus.ids)

    check_clusters(out, heavy_corpus)


def test_an_exhausted_heap_is_one_line_naming_the_stage_and_the_setting(tmp_path: Path) -> None:
    corpus = tmp_path / "long.jsonl"
    long_documents_jsonl(corpus, docs=4, words_each=25_000_000)  # ~150 MB each
    proc = neardup(
        "dedup",
        "--input",
        str(corpus),
        "--output",
        str(tmp_path / "out"),
        "--master",
        "local[2]",
        "--conf",
        "spark.driver.memory=600m",
        timeout=900,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert re.match(
        r"neardup: error: the Spark JVM ran out of memory \([^)]+\) in stage \w+; "
        r"give it more with --conf spark\.driver\.memory=\d+g \(Spark's log: \S+\)$",
        errors[0],
    ), errors[0]
    assert "Traceback" not in proc.stderr and "ConnectionRefused" not in proc.stderr
    assert "Exception" not in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists()
