"""report.html's renderer without a JVM: word diffs, escaping, caps, and the page's tables,
figures and sections against the summary and report it was given."""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.report.diff import word_diff
from neardup.report.page import render
from neardup.report.summary import TEXT_CHARS, Cluster, Doc, Histogram, Summary
from report_dom import external_references, parse, sample_pairs

_TAG = re.compile(r"</?(?:del|ins)>")


def _plain(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment))


def test_word_diff_marks_the_words_on_one_side_only() -> None:
    assert word_diff("the quick brown fox", "the quick red fox") == (
        "the quick <del>brown</del> fox",
        "the quick <ins>red</ins> fox",
    )
    # A run of changed words is one element, the spaces between them inside it.
    assert word_diff("a b c d e", "a x  y d e") == ("a <del>b c</del> d e", "a <ins>x  y</ins> d e")
    assert word_diff("one two", "zero one two three") == (
        "one two",
        "<ins>zero</ins> one two <ins>three</ins>",
    )
    # Whitespace is kept as written; equal texts have no marks.
    assert word_diff("  a\n\nb\tc ", "  a\n\nb\tc ") == ("  a\n\nb\tc ", "  a\n\nb\tc ")


def test_word_diff_escapes_markup_and_control_characters() -> None:
    kept, removed = word_diff("<b>x</b> & <script>a</script>", "<b>x</b> & y\x00")
    assert kept == "&lt;b&gt;x&lt;/b&gt; &amp; <del>&lt;script&gt;a&lt;/script&gt;</del>"
    assert removed == "&lt;b&gt;x&lt;/b&gt; &amp; <ins>y\ufffd</ins>"


_words = st.lists(st.sampled_from(["a", "b", "c", "<i>", "&", "é", "x\ny"]), max_size=30)
_spaces = st.sampled_from([" ", "  ", "\n", "\t "])


# No deadline: CI runs this tier beside the Spark and end-to-end tiers, on busy cores.
@settings(deadline=None)
@given(_words, _words, _spaces)
def test_word_diff_keeps_the_texts_and_their_common_words(a: list[str], b: list[str], space: str) -> None:
    ta, tb = space.join(a), " ".join(b)
    kept, removed = word_diff(ta, tb)
    # Without the marks, each side is its text again.
    assert _plain(kept) == ta and _plain(removed) == tb
    # What is unmarked on the two sides is the same word sequence.
    unmarked_a = re.sub(r"<del>.*?</del>", " ", kept, flags=re.S)
    unmarked_b = re.sub(r"<ins>.*?</ins>", " ", removed, flags=re.S)
    assert html.unescape(unmarked_a).split() == html.unescape(unmarked_b).split()
    assert "<ins>" not in kept and "<del>" not in removed


def _report(guard: dict[str, Any] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "neardup_version": "0.1.0",
        "run_id": "abc",
        "input": "in <x>",
        "output": "file:/out",
        "config": {
            "lsh": {"threshold": 0.8},
            "verify": {"method": "exact", "threshold": None},
            "report": {"seed": 7},
        },
        "counts": {"input": 12, "malformed": None, "rejected": 1, "exact_duplicates": 2, "kept": 7},
        "seconds": {"read": 1.5, "sign": 2.25, "report": 0.5, "total": 5.0},
        "bands": {"bands": 18, "rows": 5, "s_curve": []},
    }
    if guard is not None:
        report["guard"] = guard
    return report


def _summary(removed_similarity: Histogram | None = None) -> Summary:
    long_text = "w " * 600_000  # 1.2 M characters: the page shows the first TEXT_CHARS
    kept = Doc(10, "kept", "the quick brown fox <script>alert(1)</script>", 44)
    big = Doc(20, "kept", long_text, len(long_text))
    near = Doc(11, "near_duplicate", "the quick red fox <script>alert(1)</script>", 43, 0.83)
    exact = Doc("id<&>", "exact_duplicate", None, 0)
    return Summary(
        statuses={"unique": 3, "kept": 2, "near_duplicate": 4, "exact_duplicate": 2, "rejected": 1},
        sizes={1: 3, 3: 1, 5: 1},
        edge_similarity=Histogram({80: 3, 99: 2}),
        removed_similarity=removed_similarity,
        largest=[Cluster(big, 5), Cluster(kept, 3)],
        samples=[Cluster(kept, 3, [near, exact]), Cluster(big, 5, [Doc(21, "near_duplicate", long_text, 9)])],
    )


def _svg(src: str) -> str:
    prefix = "data:image/svg+xml;base64,"
    assert src.startswith(prefix)
    return base64.b64decode(src[len(prefix) :]).decode("utf-8")


def test_page_tables_figures_and_samples() -> None:
    page = render(_report(), _summary())
    root = parse(page)
    assert root.by_id("counts-table").table_rows() == [  # type: ignore[union-attr]
        ["input", "input rows", "12"],
        ["rejected", "rejected", "1"],
        ["exact_duplicates", "exact duplicates (removed)", "2"],
        ["kept", "kept documents", "7"],
    ]
    assert root.by_id("seconds-table").table_rows() == [  # type: ignore[union-attr]
        ["read", "1.5"],
        ["sign", "2.2"],
        ["report", "0.5"],
        ["total", "5.0"],
    ]
    figures = {f.attrs["id"]: f for f in root.find_all("figure")}
    assert set(figures) == {"fig-seconds", "fig-s-curve", "fig-similarity", "fig-sizes"}
    for fig in figures.values():
        (img,) = fig.find_all("img")
        (caption,) = fig.find_all("figcaption")
        assert img.attrs["alt"] and caption.text().startswith(img.attrs["alt"])
        svg = _svg(img.attrs["src"])
        assert f"<dc:title>{html.escape(img.attrs['alt'], quote=False)}</dc:title>" in svg
        assert not re.search(r'href="(?!#)', svg), "an SVG refers to something outside itself"
    assert "(5 pairs; dashed line: verify.threshold 0.8)" in figures["fig-similarity"].text()

    rows = root.by_id("largest-table").table_rows()  # type: ignore[union-attr]
    assert [r[:3] for r in rows] == [["1", "20", "5"], ["2", "10", "3"]]
    assert rows[0][3].startswith("w w w") and "(first 240 of 1,200,000 characters)" in rows[0][3]
    assert rows[1][3] == "the quick brown fox <script>alert(1)</script>"

    samples = sample_pairs(root)
    assert [(h, len(p)) for h, p in samples] == [
        ("Cluster of 10: 3 documents", 2),
        ("Cluster of 20: 5 documents, 1 removed shown", 1),
    ]
    first = samples[0][1][0]
    assert first.kept_header == "kept 10 (44 characters)"
    assert first.removed_header == "near duplicate 11 (43 characters, similarity 0.830)"
    assert (first.deleted, first.inserted) == (["brown"], ["red"])
    assert first.removed_text == "the quick red fox <script>alert(1)</script>"
    missing = samples[0][1][1]
    assert (
        missing.removed_header == "exact duplicate id<&> (text not found)"
        and missing.removed_text == "(text not found)"
    )
    # Texts are cut at TEXT_CHARS even when given longer ones.
    cut = samples[1][1][0]
    assert cut.kept_text.startswith("w w") and len(cut.kept_text) < TEXT_CHARS + 100
    assert len(page) < 200_000

    ids = [n.attrs["id"] for n in root.walk() if "id" in n.attrs]
    assert len(ids) == len(set(ids)), "an id is used twice"
    # Nothing of the texts became markup, and nothing is fetched.
    assert root.find_all("script") == [] and external_references(root) == []
    assert root.by_id("guard-status").text() == "guard not run"  # type: ignore[union-attr]
    assert root.by_id("guard-table") is None and root.by_id("fig-removed-similarity") is None
    assert json.loads(root.find_all("pre", "config")[0].text())["report"] == {"seed": 7}


def test_page_with_the_guard() -> None:
    guard = {
        "enabled": True,
        "threshold": 0.7,
        "rounds": 2,
        "failing_per_round": [12, 0],
        "clusters_split": 3,
        "documents_rehomed": 11,
        "largest_cluster_before": 1200,
        "largest_cluster_after": 40,
        "seconds": 1.25,
    }
    root = parse(render(_report(guard), _summary(Histogram({70: 4, 100 - 1: 6}, missing=1))))
    status = root.by_id("guard-status")
    assert (
        status is not None
        and status.text() == "guard on at threshold 0.7: 3 clusters split, 11 documents re-homed"
    )
    assert root.by_id("guard-table").table_rows() == [  # type: ignore[union-attr]
        ["enabled", "enabled", "yes"],
        ["threshold", "threshold", "0.7"],
        ["rounds", "rounds", "2"],
        ["failing_per_round", "documents below the threshold, per round", "12, 0"],
        ["clusters_split", "clusters split", "3"],
        ["documents_rehomed", "documents re-homed", "11"],
        ["largest_cluster_before", "largest cluster before", "1,200"],
        ["largest_cluster_after", "largest cluster after", "40"],
        ["seconds", "seconds", "1.25"],
    ]
    fig = root.by_id("fig-removed-similarity")
    assert fig is not None
    assert "(10 removed documents; 1 without one; dashed line: guard.threshold 0.7)" in fig.text()


@pytest.mark.parametrize(
    ("guard", "status"),
    [
        (
            {"enabled": False, "reason": "verify.method none keeps no similarities"},
            "guard not run: verify.method none keeps no similarities",
        ),
        (
            {"enabled": False, "threshold": None, "rounds": 0, "clusters_split": 0},
            "guard off (guard.enabled: false): removed documents were scored, none split off",
        ),
    ],
)
def test_page_says_when_the_guard_did_not_split(guard: dict[str, Any], status: str) -> None:
    root = parse(render(_report(guard), _summary(Histogram({}))))
    assert root.by_id("guard-status").text() == status  # type: ignore[union-attr]
    assert (root.by_id("guard-table") is not None) == ("rounds" in guard)
    assert root.by_id("fig-removed-similarity") is None  # nothing to count


def test_rendering_imports_no_pyspark_and_leaves_pyplot_alone() -> None:
    code = (
        "import json, sys\n"
        "import neardup.report.page\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')"
        " or m == 'matplotlib.pyplot')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == []
