"""survivor.policy priority: a source ranking decides which document of a cluster, and of
an exact group, is kept; survivor.then and the smallest id break its ties.

The whole job runs on a generated corpus with planted near-duplicate clusters and exact
copies whose members carry different sources (listed, unlisted and null), and every
document's row of clusters/ (kept document, kept flag, status, similarity) is compared
with the brute-force reference: exact Jaccard of every similar pair, BFS components
(the guard in plain Python where it is on), the best member picked here in plain Python
by the list's position, then `then`, then the id. Also the stage pieces on hand-made
frames: the `_priority` column and the input checks; and the resume fingerprints.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from frames import assert_frames_equal
from neardup import columns as C
from neardup import config
from neardup.commands.dedup import fingerprints, run
from neardup.errors import UsageError
from neardup.stages.read import Input, check_columns, documents
from neardup.stages.sign import sign_params
from neardup_testkit.reference import guarded_clusters, normalize
from neardup_testkit.synth import CorpusSpec, generate

SOURCES = ["wikipedia", "books", "web", "forum", None]  # forum and null: not in the list
ORDER = ["wikipedia", "books", "web"]
Order = Callable[[Any], Any]
Row = tuple[Any, Any, bool, str, float | None]  # id, cluster_id, kept, status, similarity


@dataclass(frozen=True)
class Corpus:
    path: str
    root: Path
    ids: list[int]
    texts: list[str]
    columns: dict[str, dict[int, Any]]  # column -> id -> value


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    # Edited copies at J >= 0.82 to their base: every cluster's pairs are well above the
    # threshold, so LSH finds them all and the components are the reference's. Many exact
    # and format copies (same normalized text, other lengths): exact groups to choose in.
    spec = CorpusSpec(
        num_docs=1200,
        seed=23,
        mean_chars=400,
        dup_fraction=0.6,
        jaccard_range=(0.82, 1.0),
        exact_copy_fraction=0.25,
        format_copy_fraction=0.25,
    )
    table = generate(spec)
    rng = np.random.default_rng(5)
    n = len(table)
    tier = rng.integers(0, 4, n)
    year = rng.integers(1990, 1996, n)  # few years: ties that the id must break
    table = (
        table.append_column("source", pa.array(rng.choice(np.array(SOURCES, dtype=object), n), pa.string()))
        .append_column("tier", pa.array(tier, pa.int64(), mask=rng.random(n) < 0.2))
        .append_column("year", pa.array(year, pa.int32(), mask=rng.random(n) < 0.15))
    )
    root = tmp_path_factory.mktemp("priority")
    path = root / "input"
    path.mkdir()
    step = (n + 2) // 3  # several files: more than one input partition
    for i in range(3):
        pq.write_table(table.slice(i * step, step), path / f"part-{i}.parquet")
    ids = table["id"].to_pylist()
    cols = {
        c: dict(zip(ids, table[c].to_pylist(), strict=True)) for c in ("source", "tier", "year", "quality")
    }
    return Corpus(str(path), root, ids, table["text"].to_pylist(), cols)


def _by_list(order: Sequence[Any], values: dict[int, Any]) -> Callable[[int], int]:
    """A document's place in the list; unlisted values and nulls all after it."""
    place = {v: i for i, v in enumerate(order)}
    return lambda i: place.get(values[i], len(order))


def _expected(corpus: Corpus, guard: float | None, order: Order) -> list[Row]:
    """Every document's (id, kept id, kept, status, similarity) by brute force: the
    reference's clusters and similarities under `order`; the status from the exact groups
    (equal normalized text) and the cluster sizes, here."""
    clusters = guarded_clusters(corpus.ids, corpus.texts, 0.8, guard, rank=order)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, t in zip(corpus.ids, corpus.texts, strict=True):
        groups[normalize(t)].append(i)
    rep = {m: min(g, key=order) for g in groups.values() for m in g}
    size: dict[int, int] = defaultdict(int)
    for kept, _ in clusters.values():
        size[kept] += 1
    rows = []
    for i in sorted(corpus.ids):
        kept, similarity = clusters[i]
        if kept == i:
            status = "kept" if size[i] > 1 else "unique"
        else:
            status = "exact_duplicate" if rep[i] != i else "near_duplicate"
        rows.append((i, kept, kept == i, status, _rounded(similarity)))
    return rows


def _clusters(out: Path) -> list[Row]:
    rows = pq.read_table(out / "clusters").to_pylist()
    assert all(r["reason"] is None for r in rows)
    return [
        (
            r["id"],
            r["cluster_id"],
            r["kept"],
            r["status"],
            None if r["similarity"] is None else round(r["similarity"], 9),
        )
        for r in rows
    ]


def _rounded(similarity: float | None) -> float | None:
    return None if similarity is None else round(similarity, 9)


def _differ(a: list[Row], b: list[Row]) -> int:
    """Documents whose kept document differs between two results (rows by id)."""
    return sum(x[1] != y[1] for x, y in zip(a, b, strict=True))


def test_priority_by_source_then_longest(spark: Any, corpus: Corpus) -> None:
    sets = [
        "survivor.policy=priority",
        "survivor.priority_column=source",
        "survivor.priority=[wikipedia, books, web]",
        "guard.enabled=false",
    ]
    out = corpus.root / "source-longest"
    run(spark, config.load(sets=[*sets, "report.html=false"]), corpus.path, str(out))
    length = {i: len(t) for i, t in zip(corpus.ids, corpus.texts, strict=True)}
    place = _by_list(ORDER, corpus.columns["source"])
    want = _expected(corpus, None, lambda i: (place(i), -length[i], i))
    assert _clusters(out) == want
    kept = pq.read_table(out / "kept", columns=["id"])["id"].to_pylist()
    assert sorted(kept) == [r[0] for r in want if r[2]]
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["survivor"] == {
        "policy": "priority",
        "column": None,
        "priority_column": "source",
        "priority": ORDER,
        "then": "longest",
    }

    # The test can tell: on this corpus, priority keeps other documents than longest does,
    # and the tie-break by length matters (the list alone, then the id, differs too).
    longest = _expected(corpus, None, lambda i: (-length[i], i))
    no_then = _expected(corpus, None, lambda i: (place(i), i))
    assert _differ(want, longest) > 50
    assert _differ(want, no_then) > 20
    # Kept documents with an unlisted or a null source: their whole cluster has none listed.
    members: dict[int, list[int]] = defaultdict(list)
    for i, k, *_ in want:
        members[k].append(i)
    unlisted = [k for k, m in members.items() if len(m) > 1 and place(k) == len(ORDER)]
    assert unlisted and all(place(i) == len(ORDER) for k in unlisted for i in members[k])


def test_integer_priority_then_earliest_through_the_guard(spark: Any, corpus: Corpus) -> None:
    # An integer column listed as YAML integers; ties by the smallest year (nulls last),
    # then the id. The guard is on (the default): it re-chooses survivors by the same order.
    sets = [
        "survivor.policy=priority",
        "survivor.priority_column=tier",
        "survivor.priority=[3, 1]",
        "survivor.then=earliest",
        "survivor.column=year",
    ]
    out = corpus.root / "tier-earliest"
    result = run(spark, config.load(sets=[*sets, "report.html=false"]), corpus.path, str(out))
    place = _by_list([3, 1], corpus.columns["tier"])
    year = corpus.columns["year"]
    order = lambda i: (place(i), year[i] is None, year[i] or 0, i)  # noqa: E731
    assert _clusters(out) == _expected(corpus, 0.7, order)
    assert result.report["guard"]["documents_rehomed"] > 0  # the guard chose survivors too


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["survivor.priority_column=origin"], "survivor.priority_column names 'origin', which input"),
        (["survivor.priority_column=quality"], "'quality', of type double; it must be a string or integer"),
        (
            ["survivor.priority_column=source", "survivor.then=quality", "survivor.column=score"],
            "survivor.column names 'score', which input",
        ),
    ],
)
def test_the_priority_columns_must_be_in_the_input(spark: Any, sets: list[str], message: str) -> None:
    df = spark.createDataFrame(
        [(1, "a text", "web", 0.5)], "id long, text string, source string, quality double"
    )
    cfg = config.load(sets=["survivor.policy=priority", "survivor.priority=[web]", *sets])
    with pytest.raises(UsageError, match=message):
        check_columns(Input(df, "parquet", "in.parquet"), cfg)


def test_priority_column_is_checked_only_under_priority(spark: Any) -> None:
    df = spark.createDataFrame([(1, "a text")], "id long, text string")
    with pytest.warns(config.ConfigWarning, match="read only when survivor.policy is priority"):
        cfg = config.load(sets=["survivor.priority_column=origin"])
    check_columns(Input(df, "parquet", "in.parquet"), cfg)  # nothing reads it: no error


@pytest.mark.parametrize(
    ("kind", "values", "listed"),
    [
        ("string", ["web", "books", None, "forum", "wikipedia", "web"], "[wikipedia, books, web]"),
        ("int", [3, 1, None, 0, 7, 3], "[7, 1, 3]"),
    ],
)
def test_documents_carry_the_place_in_the_list(spark: Any, kind: str, values: list[Any], listed: str) -> None:
    df = spark.createDataFrame(
        [(i, f"text {i}", v, i / 10) for i, v in enumerate(values)],
        f"id long, text string, source {kind}, q double",
    )
    sets = ["survivor.policy=priority", "survivor.priority_column=source", f"survivor.priority={listed}"]
    cfg = config.load(sets=[*sets, "survivor.then=quality", "survivor.column=q"])
    # Written out by hand: wikipedia / 7 is 0, books / 1 is 1, web / 3 is 2; the rest 3.
    places = [2, 1, 3, 3, 0, 2]
    want = spark.createDataFrame(
        [(i, f"text {i}", i / 10, p) for i, p in enumerate(places)],
        f"{C.DOC_ID} long, {C.TEXT} string, {C.RANK} double, {C.PRIORITY} int",
    )
    assert_frames_equal(documents(df, cfg), want)


def test_fingerprints_follow_the_priority_settings() -> None:
    base = [
        "survivor.policy=priority",
        "survivor.priority_column=source",
        "survivor.priority=[wikipedia, books]",
    ]
    changes = [
        [],
        ["survivor.priority=[books, wikipedia]"],
        ["survivor.priority=[wikipedia, books, web]"],
        ["survivor.priority_column=origin"],
        ["survivor.then=earliest"],
        ["survivor.then=earliest", "survivor.column=year"],
    ]
    prints = []
    for change in changes:
        cfg = config.load(sets=[*base, *change])
        prints.append(fingerprints(cfg, sign_params(cfg), [("in.parquet", 10, 1)], None).signatures)
    assert len(set(prints)) == len(changes)
    again = config.load(sets=base)
    assert fingerprints(again, sign_params(again), [("in.parquet", 10, 1)], None).signatures == prints[0]
