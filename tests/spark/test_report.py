"""The report stage's figures against plain-Python counts of the same frames, and
report.html written (or not) by a real run."""

from __future__ import annotations

import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from neardup import config
from neardup.commands.dedup import run
from neardup.report.summary import TEXT_CHARS, Cluster, Doc, Histogram, Summary
from neardup.stages.report_figures import gather, similarity_histogram
from report_dom import parse

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
]
# Clusters of duplicates by size: eight of size 3 compete for the last places of the ten largest.
SIZES = [7, 5, 5, 4, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2]
UNIQUE, REJECTED = 30, 3
BIG = 1_000_003  # characters of the largest cluster's kept text: collected cut to TEXT_CHARS
# Similarities on and around bin edges (0.29 * 100 is 28.999999999999996 in floating point),
# and 1.0, which goes in the last bin.
EDGE_VALUES = [1.0, 0.8, 0.29, 0.57, 0.58, 0.999999, 0.805, 0.9, None, None]


def _corpus(with_similarity: bool) -> dict[str, list[Any]]:
    rng = random.Random(5)
    ids = rng.sample(range(10_000), sum(SIZES) + UNIQUE + REJECTED)
    clusters, texts = [], {}
    at = 0
    for size in SIZES:
        members = ids[at : at + size]
        at += size
        kept = members[0]
        base = " ".join(rng.choices(WORDS, k=40))
        texts[kept] = base if size != SIZES[0] else ("x" * (BIG - 1)) + "!"
        clusters.append((kept, kept, True, "kept", None, None))
        for m in members[1:]:
            exact = rng.random() < 0.4
            words = base.split()
            if not exact:
                words[rng.randrange(len(words))] = rng.choice(WORDS).upper()
            texts[m] = " ".join(words)
            sim = None if m == members[-1] and size == 4 else round(rng.uniform(0.3, 1.0), 3)
            clusters.append((m, kept, False, "exact_duplicate" if exact else "near_duplicate", None, sim))
    for i in ids[at : at + UNIQUE]:
        texts[i] = " ".join(rng.choices(WORDS, k=12))
        clusters.append((i, i, True, "unique", None, None))
    for i in ids[at + UNIQUE :]:
        texts[i] = None
        clusters.append((i, None, False, "rejected", "null text", None))
    if not with_similarity:
        clusters = [c[:5] for c in clusters]
    edges = [(i, i + 1, v) for i, v in enumerate(EDGE_VALUES)]
    edges += [(100 + i, 200 + i, round(rng.uniform(0.8, 1.0), rng.choice([2, 3, 6]))) for i in range(150)]
    return {"clusters": clusters, "texts": list(texts.items()), "edges": edges}


_CLUSTERS = T.StructType(
    [
        T.StructField("id", T.LongType(), False),
        T.StructField("cluster_id", T.LongType(), True),
        T.StructField("kept", T.BooleanType(), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("reason", T.StringType(), True),
    ]
)


def _frames(spark: Any, data: dict[str, list[Any]], with_similarity: bool, parts: int = 1) -> tuple[Any, ...]:
    schema = _CLUSTERS
    if with_similarity:
        schema = T.StructType([*_CLUSTERS.fields, T.StructField("similarity", T.DoubleType(), True)])
    clusters = spark.createDataFrame(data["clusters"], schema).repartition(parts)
    edges = spark.createDataFrame(data["edges"], "src long, dst long, similarity double").repartition(parts)
    source = spark.createDataFrame(
        [(i, t, f"meta-{i}") for i, t in data["texts"]], "doc long, body string, other string"
    ).repartition(parts)
    return clusters, edges, source


def _histogram(values: list[float | None]) -> Histogram:
    # Decimal: the bin of 0.57 is 57 without any floating-point rounding.
    counts = Counter(min(int(Decimal(str(v)) * 100), 99) for v in values if v is not None)
    return Histogram(dict(counts), sum(1 for v in values if v is None))


def _doc(texts: dict[int, str | None], i: int, status: str, sim: float | None = None) -> Doc:
    text = texts[i]
    assert text is not None
    return Doc(i, status, text[:TEXT_CHARS], len(text), sim)


@pytest.mark.parametrize("on_driver", [False, True], ids=["spark", "driver"])
@pytest.mark.parametrize("with_similarity", [False, True], ids=["no-guard", "guard-column"])
def test_gathered_figures_match_plain_counts(spark: Any, with_similarity: bool, on_driver: bool) -> None:
    data = _corpus(with_similarity)
    clusters, edges, source = _frames(spark, data, with_similarity, parts=3)
    got = gather(clusters, edges, source, "doc", "body", sample_clusters=4, seed=42, on_driver=on_driver)

    names = ["id", "cluster_id", "kept", "status", "reason", "similarity"]
    rows = [dict(zip(names, (*c, None)[:6], strict=True)) for c in data["clusters"]]
    texts = dict(data["texts"])
    size_of = Counter(r["cluster_id"] for r in rows if r["cluster_id"] is not None)
    assert got.statuses == dict(Counter(r["status"] for r in rows))
    assert got.sizes == dict(Counter(size_of.values()))
    assert got.edge_similarity == _histogram([e[2] for e in data["edges"]])
    fixed = similarity_histogram(edges.filter(edges.src < len(EDGE_VALUES)), "similarity")
    assert fixed == Histogram({99: 2, 80: 2, 29: 1, 57: 1, 58: 1, 90: 1}, missing=2)
    if with_similarity:
        assert got.removed_similarity == _histogram(
            [r["similarity"] for r in rows if not r["kept"] and r["cluster_id"]]
        )
        assert got.removed_similarity.missing == 1
    else:
        assert got.removed_similarity is None

    ranked = sorted(((k, n) for k, n in size_of.items() if n > 1), key=lambda kv: (-kv[1], kv[0]))
    assert got.largest == [Cluster(_doc(texts, k, "kept"), n) for k, n in ranked[:10]]
    assert got.largest[0].kept.chars == BIG and len(got.largest[0].kept.text or "") == TEXT_CHARS

    # The samples: four distinct clusters of duplicates, each with its first removed members
    # (near duplicates first, then by id) and their texts.
    assert len(got.samples) == 4 and len({c.kept.id for c in got.samples}) == 4
    for c in got.samples:
        members = [r for r in rows if r["cluster_id"] == c.kept.id and not r["kept"]]
        members.sort(key=lambda r: (r["status"] == "exact_duplicate", r["id"]))
        want = [_doc(texts, r["id"], r["status"], r["similarity"]) for r in members[:3]]
        assert c == Cluster(_doc(texts, c.kept.id, "kept"), size_of[c.kept.id], want)


def test_the_sample_depends_on_the_seed_only(spark: Any) -> None:
    data = _corpus(False)

    def sample(parts: int, seed: int, on_driver: bool = False) -> Summary:
        clusters, edges, source = _frames(spark, data, False, parts)
        return gather(
            clusters, edges, source, "doc", "body", sample_clusters=5, seed=seed, on_driver=on_driver
        )

    one = sample(1, 42)
    assert sample(7, 42) == one  # whatever the partitioning
    assert sample(3, 42, on_driver=True) == one  # whichever way it is counted
    other = sample(2, 43)
    assert {c.kept.id for c in other.samples} != {c.kept.id for c in one.samples}
    clusters, edges, source = _frames(spark, data, False)
    assert gather(clusters, edges, source, "doc", "body", sample_clusters=0, seed=42).samples == []


BASE = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
    "and the bird sings a song about rivers mountains valleys and the sea far away"
)


def test_a_run_writes_report_html(spark: Any, tmp_path: Path) -> None:
    rows = [
        {"id": "a", "text": BASE},
        {"id": "b", "text": BASE + " today"},
        {"id": "c", "text": "  The QUICK brown fox " + BASE[20:]},
        {"id": "d", "text": None},
        {"id": "e", "text": "something else entirely, <b>not</b> markup & not similar at all to the rest"},
    ]
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), inp)
    report = run(spark, config.load(), str(inp), str(tmp_path / "on")).report
    page = parse((tmp_path / "on" / "report.html").read_text("utf-8"))
    want = [[k, v] for k, v in report["counts"].items() if v is not None]
    assert [[r[0], r[2].replace(",", "")] for r in page.by_id("counts-table").table_rows()] == [  # type: ignore[union-attr]
        [k, str(v)] for k, v in want
    ]
    assert [r[:3] for r in page.by_id("largest-table").table_rows()] == [["1", "b", "3"]]  # type: ignore[union-attr]
    assert "report" in report["seconds"]
    assert json.loads((tmp_path / "on" / "report.json").read_text())["counts"] == report["counts"]
    # With report.html=false neither: every run of test_stages.py checks it.
