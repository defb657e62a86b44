"""Incremental dedup (`index build`, `dedup --against`) against brute force, and against
deduplicating both batches at once.

The corpus: a generated one (neardup_testkit.synth: planted clusters of near-duplicates)
and planted drifting chains (neardup_testkit.chains), whose documents are split at random
into batch A and batch B, so clusters and chains straddle the two. A is deduplicated, its
kept/ indexed, B deduplicated --against the index; and A+B at once with A's documents
preferred (survivor.policy earliest on a `source` column: 0 for A, 1 for B; the same policy
in every run). Every result is compared whole with the plain-Python references of
neardup_testkit.reference (exact Jaccard of every similar pair, components by BFS, the guard
round by round), and the union of kept documents with the one-run result: the differences
must be exactly those the references predict, each of a kind docs/design.md names.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from neardup import config
from neardup.commands import index as indexing
from neardup.commands.dedup import run
from neardup.errors import IndexRefusedError, InputDataError
from neardup_testkit import chains, hashspec
from neardup_testkit.reference import (
    bfs_components,
    exact_pairs,
    guarded_clusters,
    incremental_clusters,
    normalize,
    similar_pairs,
)
from neardup_testkit.synth import CorpusSpec, generate

SETS = ["survivor.policy=earliest", "survivor.column=source", "report.html=false"]
THRESHOLD, GUARD = 0.8, 0.7
Result = dict[int, tuple[int, float | None]]


@dataclass(frozen=True)
class Corpus:
    root: Path
    text: dict[int, str]
    source: dict[int, int]  # 0: batch A, 1: batch B

    def ids(self, source: int | None = None) -> list[int]:
        return sorted(i for i, s in self.source.items() if source is None or s == source)

    def rank(self, i: int) -> tuple[int, int]:
        return (self.source[i], i)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    # 780 documents: every kind of difference test_incremental_... names happens, and the
    # references take seconds (five times as many took a minute).
    planted = generate(CorpusSpec(num_docs=600, seed=23, mean_chars=400, dup_fraction=0.5))
    chained = chains.generate(chains.ChainSpec(chains=10, steps=8, stars=10, singles=40, seed=9))
    ids = planted["id"].to_pylist() + chained["id"].to_pylist()
    texts = planted["text"].to_pylist() + chained["text"].to_pylist()
    source = (np.random.default_rng(4).random(len(ids)) < 0.4).astype(np.int64)
    table = pa.table({"id": pa.array(ids, pa.int64()), "text": texts, "source": pa.array(source)})
    root = tmp_path_factory.mktemp("against")
    for name, rows in (("A", source == 0), ("B", source == 1), ("AB", np.ones(len(ids), bool))):
        part = table.filter(pa.array(rows))
        (root / name).mkdir()
        step = (len(part) + 2) // 3  # several files: the input is not one task
        for k in range(3):
            pq.write_table(part.slice(k * step, step), root / name / f"part-{k}.parquet")
    return Corpus(root, dict(zip(ids, texts, strict=True)), dict(zip(ids, source.tolist(), strict=True)))


@dataclass(frozen=True)
class References:
    a: Result  # batch A deduplicated alone
    b: Result  # batch B against the index of A's kept documents
    whole: Result  # A+B at once, A preferred
    indexed: frozenset[int]


@pytest.fixture(scope="module")
def refs(corpus: Corpus) -> References:
    def guarded(ids: list[int]) -> Result:
        return guarded_clusters(ids, [corpus.text[i] for i in ids], THRESHOLD, GUARD, rank=corpus.rank)

    a = guarded(corpus.ids(0))
    indexed = sorted(i for i, (kept, _) in a.items() if kept == i)
    b_ids = corpus.ids(1)
    b = incremental_clusters(
        b_ids,
        [corpus.text[i] for i in b_ids],
        indexed,
        [corpus.text[i] for i in indexed],
        THRESHOLD,
        GUARD,
        rank=corpus.rank,
    )
    return References(a, b, guarded(corpus.ids()), frozenset(indexed))


@dataclass(frozen=True)
class Runs:
    a: Path
    b: Path
    index: Path


@pytest.fixture(scope="module")
def runs(spark: Any, corpus: Corpus) -> Runs:
    """Batch A deduplicated, its kept/ indexed, batch B deduplicated against the index."""
    root = corpus.root
    cfg = config.load(sets=SETS)
    run(spark, cfg, str(root / "A"), str(root / "out-A"))
    indexing.build(spark, cfg, str(root / "out-A" / "kept"), str(root / "index"), overwrite=False)
    run(spark, cfg, str(root / "B"), str(root / "out-B"), against=str(root / "index"))
    return Runs(root / "out-A", root / "out-B", root / "index")


@pytest.fixture(scope="module")
def at_once(spark: Any, corpus: Corpus) -> Path:
    """A+B deduplicated at once (a fixture apart: the Spark 3.5 tier's tests do not read it)."""
    out = corpus.root / "out-AB"
    run(spark, config.load(sets=SETS), str(corpus.root / "AB"), str(out))
    return out


def _clusters(out: Path) -> list[dict[str, Any]]:
    return pq.read_table(out / "clusters").to_pylist()


def _result(out: Path) -> Result:
    return {r["id"]: (r["cluster_id"], _round(r["similarity"])) for r in _clusters(out)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 9)


def _rounded(res: Result) -> Result:
    return {i: (kept, _round(s)) for i, (kept, s) in res.items()}


def _kept(out: Path) -> set[int]:
    return set(pq.read_table(out / "kept", columns=["id"])["id"].to_pylist())


def test_batch_a_and_the_whole_corpus_equal_brute_force(runs: Runs, at_once: Path, refs: References) -> None:
    assert _result(runs.a) == _rounded(refs.a)
    assert _result(at_once) == _rounded(refs.whole)


def test_batch_b_against_the_index_equals_brute_force(runs: Runs, refs: References, corpus: Corpus) -> None:
    rows = _clusters(runs.b)
    assert _result(runs.b) == _rounded(refs.b)
    # matched_index_id: the kept document when it is an indexed one, else null.
    want = {i: (kept if kept in refs.indexed else None) for i, (kept, _) in refs.b.items()}
    assert {r["id"]: r["matched_index_id"] for r in rows} == want
    # Only the batch's rows: kept/ holds the batch's survivors, every input column unchanged.
    kept = pq.read_table(runs.b / "kept")
    assert kept.schema.names == ["id", "text", "source"]
    assert set(kept["id"].to_pylist()) == {i for i, (k, _) in refs.b.items() if k == i}
    report = json.loads((runs.b / "report.json").read_text())
    matched = sum(v is not None for v in want.values())
    assert report["counts"]["matched_index"] == report["index"]["matched"] == matched > 50
    assert report["counts"]["input"] == len(corpus.ids(1))


def _full_graph(corpus: Corpus) -> dict[int, int]:
    """Components of the whole corpus's similar and exact pairs."""
    ids = corpus.ids()
    texts = [corpus.text[i] for i in ids]
    edges = set(similar_pairs(ids, texts, THRESHOLD)) | exact_pairs(ids, texts)
    return bfs_components(ids, edges)


def _linked_to_index(corpus: Corpus, refs: References) -> set[int]:
    """Batch B documents with a path to an indexed document over B's similar and exact
    pairs and B-to-index pairs: what dedup --against can see."""
    nodes = corpus.ids(1) + sorted(refs.indexed)
    texts = [corpus.text[i] for i in nodes]
    edges = {
        (a, b)
        for a, b in set(similar_pairs(nodes, texts, THRESHOLD)) | exact_pairs(nodes, texts)
        if not (a in refs.indexed and b in refs.indexed)
    }
    comp = bfs_components(nodes, edges)
    reached = {comp[i] for i in refs.indexed}
    return {i for i in corpus.ids(1) if comp[i] in reached}


def test_incremental_kept_documents_equal_deduplicating_at_once_but_for_the_documented_exceptions(
    runs: Runs, at_once: Path, refs: References, corpus: Corpus
) -> None:
    incremental = _kept(runs.a) | _kept(runs.b)
    whole = _kept(at_once)
    want_inc = {i for i, (k, _) in {**refs.a, **refs.b}.items() if k == i}
    want_whole = {i for i, (k, _) in refs.whole.items() if k == i}
    # The differences are exactly those brute force predicts ...
    assert incremental - whole == want_inc - want_whole
    assert whole - incremental == want_whole - want_inc
    differing = (incremental - whole) | (whole - incremental)
    # ... all inside clusters that join documents of both batches ...
    comp = _full_graph(corpus)
    batches_of: dict[int, set[int]] = {}
    for i in corpus.ids():
        batches_of.setdefault(comp[i], set()).add(corpus.source[i])
    assert all(batches_of[comp[i]] == {0, 1} for i in differing)
    # ... and each of the four kinds README.md names ("Against deduplicating at once").
    linked = _linked_to_index(corpus, refs)
    kinds: Counter[int] = Counter()
    for i in differing:
        if corpus.source[i] == 0:  # 1: indexed, removed at once; 3: removed by A, kept at once
            kinds[1 if i in incremental else 3] += 1
        else:  # 2: kept, no path to an indexed document; 4: the guard, either way
            kinds[2 if i in incremental and i not in linked else 4] += 1
    print(
        f"{len(differing)} differences of {len(whole)} kept documents, by kind: {dict(sorted(kinds.items()))}"
    )
    # The planted chains make both named exceptions happen: a B document bridging two A
    # clusters, and B documents linked to A only through documents A's own run removed.
    assert kinds[1] > 0 and kinds[2] > 0
    assert len(differing) < 0.05 * len(whole)


def test_the_index_holds_every_kept_document_and_its_band_keys(runs: Runs, corpus: Corpus) -> None:
    """Read as docs/design.md lays the index out (pyarrow, not neardup's reader), checked
    against the hash definitions re-implemented in plain Python (neardup_testkit.hashspec)."""
    manifests = sorted((runs.index / "_manifest").glob("v*.json"))
    manifest = json.loads(manifests[-1].read_text())
    assert manifest["version"] == 1 and len(manifest["segments"]) == 1
    seg = runs.index / "segments" / manifest["segments"][0]["name"]
    docs = pq.read_table(seg / "docs").to_pylist()
    number_of = {d["_id"]: d["_n"] for d in docs}
    assert len(number_of) == len(docs) and set(number_of) == _kept(runs.a)
    keys = pq.read_table(seg / "keys")  # band from the directory names (band=0, band=1, ...)
    by_number: dict[int, dict[int, int]] = {}
    for row in keys.to_pylist():
        by_number.setdefault(row["_n"], {})[row["band"]] = row["_band_key"]
    p = manifest["params"]
    assert (p["lsh.bands"], p["lsh.rows"], p["minhash.num_perm"], p["minhash.method"]) == (18, 5, 128, "oph")
    assert all(len(bands) == 18 for bands in by_number.values()) and len(by_number) == len(docs)
    for i in sorted(number_of)[:40]:
        sig = _signature(corpus.text[i])
        want = [k - (1 << 64) if k >= 1 << 63 else k for k in hashspec.band_keys(sig, 18, 5, 42)]
        assert [by_number[number_of[i]][b] for b in range(18)] == want


def test_same_result_whatever_the_partitioning(
    spark: Any, runs: Runs, corpus: Corpus, tmp_path: Path
) -> None:
    """The batch in one file, rows reversed, and another shuffle width: the same clusters/."""
    table = pq.read_table(corpus.root / "B")
    pq.write_table(table.take(pa.array(range(len(table) - 1, -1, -1))), tmp_path / "b.parquet")
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        run(
            spark, config.load(sets=SETS), str(tmp_path / "b.parquet"), str(tmp_path / "out"), str(runs.index)
        )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions_before)
    assert sorted(_clusters(tmp_path / "out"), key=lambda r: r["id"]) == _clusters(runs.b)


def test_an_index_of_other_parameters_or_texts_or_ids_is_refused(
    spark: Any, runs: Runs, corpus: Corpus, tmp_path: Path
) -> None:
    index = str(runs.index)
    b, out = str(corpus.root / "B"), str(tmp_path / "out")
    other = config.load(sets=[*SETS, "lsh.bands=16", "lsh.rows=8"])
    want = f"index {index} was built with lsh.bands=18, this run has lsh.bands=16"
    with pytest.raises(IndexRefusedError, match=f"^{re.escape(want)}$"):
        run(spark, other, b, out, against=index)
    with pytest.raises(IndexRefusedError, match=f"^{re.escape(want)}$"):
        indexing.add(spark, other, b, index)
    seeded = config.load(sets=[*SETS, "minhash.seed=7"])
    with pytest.raises(
        IndexRefusedError, match=r"built with minhash\.seed=42, this run has minhash\.seed=7$"
    ):
        run(spark, seeded, b, out, against=index)
    cfg = config.load(sets=SETS)
    with pytest.raises(IndexRefusedError, match="holds no signatures"):
        run(spark, config.load(sets=[*SETS, "verify.method=signature"]), b, out, against=index)
    # A batch that repeats indexed documents' ids.
    with pytest.raises(InputDataError, match=r"id\(s\) are already in index"):
        run(spark, cfg, str(corpus.root / "AB"), out, against=index)
    with pytest.raises(InputDataError, match=r"id\(s\) are already in index"):
        indexing.add(spark, cfg, str(runs.a / "kept"), index)
    assert not Path(out).exists()


def test_an_index_whose_texts_changed_is_refused(spark: Any, corpus: Corpus, tmp_path: Path) -> None:
    """Exact verification reads candidates' texts back from the files the index recorded:
    if one was rewritten or is gone since, the run stops before any work (exit 4)."""
    texts = tmp_path / "texts"
    texts.mkdir()
    pq.write_table(pq.read_table(corpus.root / "A" / "part-0.parquet"), texts / "part-0.parquet")
    cfg = config.load(sets=SETS)
    index = str(tmp_path / "index")
    indexing.build(spark, cfg, str(texts), index, overwrite=False)
    batch, out = str(corpus.root / "B"), str(tmp_path / "out")
    stamp = (texts / "part-0.parquet").stat().st_mtime
    os.utime(texts / "part-0.parquet", (stamp + 60, stamp + 60))
    with pytest.raises(IndexRefusedError, match=r"part-0\.parquet changed since it was indexed"):
        run(spark, cfg, batch, out, against=index)
    (texts / "part-0.parquet").unlink()
    with pytest.raises(IndexRefusedError, match=r"part-0\.parquet is gone; rebuild the index"):
        run(spark, cfg, batch, out, against=index)
    assert not Path(out).exists()


def _signature(text: str) -> list[int]:
    """The default OPH signature, from the hash definitions in plain Python (hashspec)."""
    sh = hashspec.shingles(normalize(text), "word", 5, 5)
    return hashspec.oph([hashspec.shingle_hash(s, 42) for s in sh], 128, 42)


def test_signature_verification_against_an_index_of_signatures(
    spark: Any, runs: Runs, refs: References, corpus: Corpus, tmp_path: Path
) -> None:
    """An index built for verify.method signature holds the signatures, and a batch is
    verified against them: every match's similarity is the estimate from the two
    signatures (recomputed here in plain Python), and the matches are nearly those of
    exact Jaccard (the estimate is +-0.035 at 0.8, and the chains sit near it)."""
    cfg = config.load(sets=[*SETS, "verify.method=signature"])
    index = str(tmp_path / "index")
    built = indexing.build(spark, cfg, str(runs.a / "kept"), index, overwrite=False)
    assert built.manifest.signatures and built.sizes["signatures"] > 128 * 4 * built.manifest.documents
    run(spark, cfg, str(corpus.root / "B"), str(tmp_path / "out"), against=index)
    rows = [r for r in _clusters(tmp_path / "out") if r["matched_index_id"] is not None]
    sigs = {i: _signature(corpus.text[i]) for r in rows for i in (r["id"], r["matched_index_id"])}
    for r in rows:
        a, b = sigs[r["id"]], sigs[r["matched_index_id"]]
        estimate = sum(x == y for x, y in zip(a, b, strict=True)) / 128
        assert r["similarity"] == estimate >= GUARD, r
    got = {(r["id"], r["matched_index_id"]) for r in rows}
    want = {(i, k) for i, (k, _) in refs.b.items() if k in refs.indexed}
    assert len(got & want) >= 0.9 * len(want)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_texts_in_json_lines_or_csv_with_string_ids(spark: Any, fmt: str, tmp_path: Path) -> None:
    """The texts' location in the other formats (read back with the recorded columns; JSON
    Lines with the recorded id type, CSV as strings), string ids, the default policy."""
    table = generate(CorpusSpec(num_docs=500, seed=41, mean_chars=400, dup_fraction=0.6))
    ids = [f"d-{i}" for i in table["id"].to_pylist()]
    texts = table["text"].to_pylist()
    half = len(ids) // 2
    for name, rows in (("A", slice(0, half)), ("B", slice(half, None))):
        part = pa.table({"id": ids[rows], "text": texts[rows]})
        if fmt == "jsonl":
            (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part.to_pylist()))
        else:
            pacsv.write_csv(part, tmp_path / f"{name}.csv")
    cfg = config.load(sets=["report.html=false"])
    index = str(tmp_path / "index")
    built = indexing.build(spark, cfg, str(tmp_path / f"A.{fmt}"), index, overwrite=False)
    assert (built.manifest.id_type, built.segment.texts.format) == ("string", fmt)
    run(spark, cfg, str(tmp_path / f"B.{fmt}"), str(tmp_path / "out"), against=index)
    want = incremental_clusters(ids[half:], texts[half:], ids[:half], texts[:half], THRESHOLD, GUARD)
    assert _result(tmp_path / "out") == _rounded(want)
    assert sum(k in set(ids[:half]) for k, _ in want.values()) > 20
