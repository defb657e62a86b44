"""Exact verification of candidate stars against brute-force Jaccard of Python shingle sets."""

from __future__ import annotations

import datetime
import decimal
import random
from typing import Any

import numpy as np
import pytest
from pyspark.sql import functions as F

from neardup import columns as C
from neardup import config
from neardup.stages import driver_scoring, verify
from neardup.stages.sign import sign_params
from neardup.stages.verify import endpoint_texts, verify_pairs
from neardup_testkit.reference import jaccard, shingles


def _corpus(rng: random.Random) -> dict[str, str]:
    """Families of edited copies: Jaccard from ~0.3 to 1 within a family, ~0 across."""
    vocab = [f"w{i}" for i in range(400)]
    texts = {}
    for fam in range(8):
        base = [rng.choice(vocab) for _ in range(60)]
        for copy in range(6):
            words = list(base)
            for _ in range(rng.choice([0, 1, 2, 4, 8])):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            texts[f"d{fam:02d}-{copy}"] = " ".join(words)
    return texts


def _stars(rng: random.Random, ids: list[str], centre: int) -> list[tuple[str, str]]:
    """Random buckets, each a star from its smallest id (`centre` 0; -1: from its largest,
    as the guard's pairs from a kept document with a larger id): documents in several
    stars, and documents that are a centre in one star and a member of another."""
    edges = set()
    for _ in range(40):
        bucket = sorted(rng.sample(ids, rng.randint(2, 7)))
        edges.update((bucket[centre], d) for d in bucket if d != bucket[centre])
    return sorted(edges)


@pytest.mark.parametrize(
    ("seed", "batch_rows", "broadcast", "centre", "split_over"),
    [
        (3, 3, True, 0, None),
        (1, 1, False, 0, None),
        (10_000, 10_000, True, 0, None),
        (9, 3, True, -1, None),
        (103, 1, False, -1, 2),
    ],
)
def test_exact_verification_scores_every_candidate(
    spark: Any, seed: int, batch_rows: int, broadcast: bool, centre: int, split_over: int | None
) -> None:
    rng = random.Random(seed)
    texts = _corpus(rng)
    candidates = _stars(rng, sorted(texts), centre)
    assert all((a > b) == (centre == -1) for a, b in candidates)
    cfg = config.load()
    t = cfg.verify_threshold
    sets = {i: shingles(s) for i, s in texts.items()}
    want = {(a, b): jaccard(sets[a], sets[b]) for a, b in candidates}
    assert 0 < sum(j >= t for j in want.values()) < len(want)  # the threshold decides something

    docs = spark.createDataFrame(
        [(i, s, None) for i, s in texts.items()] + [("zz-null", None, None)],
        "_id string, _text string, _rank long",
    ).repartition(3)
    cand = spark.createDataFrame(candidates, "src string, dst string").repartition(2)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, str(batch_rows))  # 1 and 3: stars straddle Arrow batches
    try:
        rows = verify_pairs(
            cand, docs, docs, sign_params(cfg), "exact", t, broadcast_ends=broadcast, split_over=split_over
        ).collect()
    finally:
        spark.conf.set(key, before)
    got = {(r["src"], r["dst"]): r["similarity"] for r in rows}
    assert len(got) == len(rows)
    assert set(got) == {p for p, j in want.items() if j >= t}
    for p, j in got.items():
        assert j == pytest.approx(want[p], abs=1e-12)


@pytest.mark.parametrize(("seed", "centre", "batch_bytes"), [(5, 0, 1 << 20), (7, -1, 500), (11, 0, 1)])
def test_driver_scoring_scores_as_verification_does(
    spark: Any, monkeypatch: pytest.MonkeyPatch, seed: int, centre: int, batch_bytes: int
) -> None:
    """Texts collected once, pairs scored on the driver: the pairs and similarities of the
    brute-force reference, equal to the bit to verify_pairs' (batches of a few rows, so
    groups run over batches; centres with larger ids, as the guard's pairs)."""
    rng = random.Random(seed)
    texts = _corpus(rng)
    candidates = _stars(rng, sorted(texts), centre)
    cfg = config.load()
    t = cfg.verify_threshold
    sets = {i: shingles(s) for i, s in texts.items()}
    want = {(a, b): jaccard(sets[a], sets[b]) for a, b in candidates}
    docs = spark.createDataFrame(list(texts.items()), "_id string, _text string").repartition(3)
    ids = np.array(sorted({x for pair in candidates for x in pair}), dtype=object)
    monkeypatch.setattr(driver_scoring, "BATCH_BYTES", batch_bytes)
    scorer = driver_scoring.DriverScorer.collect(docs, ids, sign_params(cfg))
    assert scorer is not None
    src = np.array([a for a, _ in candidates], dtype=object)
    dst = np.array([b for _, b in candidates], dtype=object)
    got = scorer.score(src, dst, t)
    assert got is not None
    pairs = dict(
        zip(
            zip(got["src"].tolist(), got["dst"].tolist(), strict=True),
            got["similarity"].tolist(),
            strict=True,
        )
    )
    assert set(pairs) == {p for p, j in want.items() if j >= t}
    for p, j in pairs.items():
        assert j == pytest.approx(want[p], abs=1e-12)
    cand = spark.createDataFrame(candidates, "src string, dst string")
    spark_rows = verify_pairs(cand, docs, docs, sign_params(cfg), "exact", t).collect()
    assert pairs == {(r["src"], r["dst"]): r["similarity"] for r in spark_rows}

    # The bytes summed from (_id, _bytes), as dedup passes the signed rows where the driver
    # holds none.
    sizes = spark.createDataFrame([(i, len(x.encode())) for i, x in texts.items()], "_id string, _bytes int")
    measured = driver_scoring.frame_sizes(sizes)
    assert measured(ids) == sum(len(texts[i].encode("utf-8")) for i in ids)
    assert measured(np.array([*ids, "zz-none"], dtype=object)) is None
    by_sizes = driver_scoring.prefetcher(docs, sign_params(cfg), t, measured)(ids)
    assert by_sizes is not None and by_sizes(src, dst) is not None
    # A document whose text is not found: Spark's scoring decides, as it would.
    assert (
        driver_scoring.DriverScorer.collect(docs, np.array([*ids, "zz-none"], dtype=object), sign_params(cfg))
        is None
    )
    # Past SCORE_BYTES the caller scores in Spark.
    monkeypatch.setattr(driver_scoring, "SCORE_BYTES", 10)
    assert scorer.score(src, dst, t) is None
    monkeypatch.setattr(driver_scoring, "TEXT_BUDGET", 100)
    assert driver_scoring.DriverScorer.collect(docs, ids, sign_params(cfg)) is None
    # Known sizes decide the budget without a job: texts that fail when read are never read.
    boom = docs.withColumn(C.TEXT, F.udf(lambda t: str(1 // 0), "string")(C.TEXT))
    assert driver_scoring.DriverScorer.collect(boom, ids, sign_params(cfg), size=101) is None
    assert driver_scoring.prefetcher(boom, sign_params(cfg), t, lambda _: 101)(ids) is None
    assert driver_scoring.DriverScorer.collect(docs, ids, sign_params(cfg), size=100) is not None


def _typed(key: str, id_type: str) -> Any:
    """A test id "dFF-C" as a value of `id_type`."""
    n = 1000 * int(key[1:3]) + int(key[4:])
    if id_type == "string":
        return key
    if id_type == "date":
        return datetime.date(2000, 1, 1) + datetime.timedelta(days=n)
    if id_type.startswith("decimal"):
        return decimal.Decimal(n) * 1000 + decimal.Decimal("0.5")
    return n


@pytest.mark.parametrize(
    ("id_type", "broadcast", "filtered", "set_bound"),
    [
        ("string", False, True, None),
        ("long", False, True, None),
        ("date", False, True, None),
        ("decimal(12,1)", False, True, None),
        ("long", True, False, None),
        ("string", False, False, None),
        ("long", False, False, 10),  # more ends than the set takes: the join alone
    ],
)
def test_endpoint_texts_are_the_ends_texts(
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    id_type: str,
    broadcast: bool,
    filtered: bool,
    set_bound: int | None,
) -> None:
    """The texts of every candidate's ends and of nothing else, however the other texts are
    dropped: by a broadcast join, by the set of id fingerprints before a shuffle join (its
    payload shipped by the given broadcaster), or by the shuffle join alone."""
    rng = random.Random(f"{id_type}-{broadcast}-{filtered}-{set_bound}")
    texts = _corpus(rng)
    ids = {k: _typed(k, id_type) for k in texts}
    edges = [(ids[a], ids[b]) for a, b in _stars(rng, sorted(texts)[:36], 0)]  # 12 texts no end
    docs = spark.createDataFrame(
        [(ids[k], t) for k, t in texts.items()], f"_id {id_type}, _text string"
    ).repartition(3)
    cand = spark.createDataFrame(edges, f"src {id_type}, dst {id_type}").repartition(2)
    shared: list[Any] = []

    def share(payload: bytes) -> Any:
        shared.append(spark.sparkContext.broadcast(payload))
        return shared[-1]

    if set_bound is not None:
        monkeypatch.setattr(verify, "ID_SET_ENDS", set_bound)
    frame = endpoint_texts(cand, docs, broadcast, 2 * len(edges), share if filtered or set_bound else None)
    # The filter runs where the texts are read: the ids' hashes go to Python.
    assert ("ArrowEvalPython" in frame._jdf.queryExecution().executedPlan().toString()) == filtered
    got = frame.collect()
    ends = {e for pair in edges for e in pair}
    by_id = {ids[k]: t for k, t in texts.items()}
    assert sorted((r["_id"], r["_text"]) for r in got) == sorted((e, by_id[e]) for e in ends)
    assert len(ends) < len(texts)  # some texts had to be dropped
    assert len(shared) == (1 if filtered else 0)
    if filtered:
        # The filter alone passes the ends' texts (a non-end only on a 32-bit collision:
        # about 26 / 2**32 each, none here).
        ends_frame = spark.createDataFrame([(e,) for e in ends], f"_id {id_type}")
        passed = verify.may_be_ends(docs.select("_id", "_text"), ends_frame, share).collect()
        assert sorted(r["_id"] for r in passed) == sorted(ends)
    for b in shared:
        b.destroy()
