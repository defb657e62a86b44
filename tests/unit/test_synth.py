"""The synthetic corpus generator and the brute-force reference (neardup_testkit.reference).

Both are test oracles, so both are checked against something simpler than
themselves: planted Jaccard targets against `reference.shingles`/`jaccard`
(plain Python sets), `similar_pairs` against an all-pairs loop, components
against hand-made graphs.
"""

from __future__ import annotations

import gzip
import itertools
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import script_module
from neardup_testkit import reference as gt
from neardup_testkit import synth
from neardup_testkit.synth import CorpusSpec, generate


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    """Dup-heavy and short, so there are many planted pairs, including short documents
    where hitting a target is hardest."""
    spec = CorpusSpec(num_docs=1500, seed=3, mean_chars=700, dup_fraction=0.6)
    return generate(spec).to_pylist()


def _bases(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["cluster"]: r for r in rows if r["cluster"] >= 0 and r["target_jaccard"] is None}


def _variants(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    bases = _bases(rows)
    return [(bases[r["cluster"]], r) for r in rows if r["target_jaccard"] is not None]


# --------------------------------------------------------------------------- synth


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_docs": -1},
        {"num_docs": 10, "seed": -1},
        {"num_docs": 10, "dup_fraction": 1.5},
        {"num_docs": 10, "jaccard_range": (0.0, 0.5)},
        {"num_docs": 10, "jaccard_range": (0.8, 0.5)},
        {"num_docs": 10, "jaccard_range": (0.5, 1.2)},
        {"num_docs": 10, "max_cluster_size": 1},
        {"num_docs": 10, "mean_chars": 100},  # below min_chars
        {"num_docs": 10, "vocab_size": 10},
        {"num_docs": 10, "exact_copy_fraction": 0.7, "format_copy_fraction": 0.7},
    ],
)
def test_spec_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="CorpusSpec"):
        CorpusSpec(**kwargs)


def test_generation_is_deterministic() -> None:
    spec = CorpusSpec(num_docs=600, seed=11, mean_chars=500, dup_fraction=0.5)
    first, second = generate(spec), generate(spec)
    assert first.equals(second)
    assert first.schema.equals(synth.SCHEMA)
    other = generate(CorpusSpec(num_docs=600, seed=12, mean_chars=500, dup_fraction=0.5))
    assert other.column("text").to_pylist() != first.column("text").to_pylist()


def test_batches_concatenate_to_the_table() -> None:
    spec = CorpusSpec(num_docs=9000, seed=5, mean_chars=200, dup_fraction=0.2)
    batches = list(synth.iter_batches(spec))
    assert [b.num_rows for b in batches] == [8192, 808]
    assert pa.Table.from_batches(batches).equals(generate(spec))


def test_ids_are_unique_sparse_shuffled_and_beyond_int32(corpus: list[dict[str, Any]]) -> None:
    ids = [r["id"] for r in corpus]
    assert len(set(ids)) == len(ids)
    assert min(ids) > 2**31
    assert ids != sorted(ids)
    assert max(ids) - min(ids) > 2 * len(ids)  # not a dense range
    # Members of a cluster are spread over the table, not adjacent rows.
    rows_of: dict[int, list[int]] = defaultdict(list)
    for row, r in enumerate(corpus):
        if r["cluster"] >= 0:
            rows_of[r["cluster"]].append(row)
    adjacent = sum(b - a == 1 for rows in rows_of.values() for a, b in itertools.pairwise(rows))
    assert adjacent < 0.05 * len(rows_of)


def test_planted_cluster_structure(corpus: list[dict[str, Any]]) -> None:
    sizes = Counter(r["cluster"] for r in corpus if r["cluster"] >= 0)
    assert set(sizes.values()) <= {2, 3, 4, 5}
    assert len(set(sizes.values())) == 4
    assert abs(sum(sizes.values()) - 0.6 * len(corpus)) <= 1
    assert len(_bases(corpus)) == len(sizes)  # one base (null target) per cluster
    assert all(r["target_jaccard"] is None for r in corpus if r["cluster"] < 0)

    kinds: Counter[str] = Counter()
    for base, r in _variants(corpus):
        if r["text"] == base["text"]:
            kinds["exact"] += 1
            assert r["target_jaccard"] == 1.0
        elif gt.normalize(r["text"]) == gt.normalize(base["text"]):
            kinds["format"] += 1
            assert r["target_jaccard"] == 1.0
        else:
            kinds["edit"] += 1
            assert r["target_jaccard"] < 1.0
    total = sum(kinds.values())
    assert 0.05 < kinds["exact"] / total < 0.15
    assert 0.05 < kinds["format"] / total < 0.15


def test_planted_jaccard_hits_its_target(corpus: list[dict[str, Any]]) -> None:
    targets, achieved = [], []
    for base, r in _variants(corpus):
        targets.append(r["target_jaccard"])
        achieved.append(gt.jaccard(gt.shingles(base["text"]), gt.shingles(r["text"])))
    error = np.abs(np.array(achieved) - np.array(targets))
    assert np.mean(error <= 0.03) >= 0.98
    assert error.max() <= 0.1
    # The edited targets cover the whole range, bucket by bucket.
    edited = np.array([a for a, t in zip(achieved, targets, strict=True) if t < 1.0])
    counts, _ = np.histogram(edited, bins=np.linspace(0.3, 1.0, 8))
    assert counts.min() >= 0.5 * counts.mean(), counts
    assert edited.min() < 0.33 and edited.max() > 0.97


def test_no_similarity_outside_planted_clusters(corpus: list[dict[str, Any]]) -> None:
    ids = [r["id"] for r in corpus]
    cluster = {r["id"]: r["cluster"] for r in corpus}
    pairs = gt.similar_pairs(ids, [r["text"] for r in corpus], 0.2)
    assert pairs
    assert all(cluster[a] == cluster[b] >= 0 for a, b in pairs)


def test_lengths_follow_the_spec() -> None:
    spec = CorpusSpec(num_docs=4000, seed=2, mean_chars=1500, dup_fraction=0.0)
    lengths = np.array([len(t) for t in generate(spec).column("text").to_pylist()])
    # Mean, and the lognormal's median exp(-sigma^2 / 2) below it, within a few percent
    # (clipping at 200 nudges the mean up).
    assert abs(lengths.mean() / 1500 - 1) < 0.05
    assert abs(np.median(lengths) / (1500 * np.exp(-0.18)) - 1) < 0.06
    assert lengths.min() >= 0.8 * spec.min_chars
    assert lengths.max() <= 1.05 * spec.max_chars


def test_text_looks_like_text(corpus: list[dict[str, Any]]) -> None:
    texts = [r["text"] for r in corpus if r["cluster"] < 0]
    assert all(t[0].isupper() and t.endswith((".", "?")) for t in texts)
    assert not any("  " in t or " \n" in t or t != t.strip() for t in texts)
    assert sum("\n" in t for t in texts) > 0.5 * len(texts)  # paragraphs
    assert sum("," in t for t in texts) > 0.9 * len(texts)
    words = gt.normalize(" ".join(texts), strip_punctuation=True).split()
    assert all(w.isascii() and w.isalpha() and 2 <= len(w) <= 10 for w in words)
    # Zipfian: a few words are very frequent, most are rare.
    counts = sorted(Counter(words).values(), reverse=True)
    assert counts[0] > 0.05 * len(words) and counts[0] > 20 * counts[99]


def test_dates_and_quality(corpus: list[dict[str, Any]]) -> None:
    dates = [r["date"] for r in corpus]
    assert min(dates).year >= 2015 and max(dates).year <= 2024
    quality = [r["quality"] for r in corpus]
    assert all(0.0 <= q <= 1.0 for q in quality)
    assert len(set(quality)) < len(quality)  # ties exist, for the tie-breaking rule
    same_day = sum(r["date"] == base["date"] for base, r in _variants(corpus) if r["target_jaccard"] == 1.0)
    assert same_day > 0


def test_degenerate_sizes() -> None:
    empty = generate(CorpusSpec(num_docs=0))
    assert empty.num_rows == 0 and empty.schema.equals(synth.SCHEMA)
    one = generate(CorpusSpec(num_docs=1, seed=4))
    assert one.num_rows == 1 and one.column("cluster").to_pylist() == [-1]
    no_dups = generate(CorpusSpec(num_docs=50, dup_fraction=0.0, mean_chars=300))
    assert set(no_dups.column("cluster").to_pylist()) == {-1}
    all_dups = generate(CorpusSpec(num_docs=50, dup_fraction=1.0, mean_chars=300))
    assert all(c >= 0 for c in all_dups.column("cluster").to_pylist())


def test_jsonl_is_byte_deterministic_and_round_trips(tmp_path: Path) -> None:
    table = generate(CorpusSpec(num_docs=300, seed=9, mean_chars=300, dup_fraction=0.5))
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    synth.write_jsonl_gz(table, first)
    synth.write_jsonl_gz(table.to_batches(), second)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime
    assert synth.read_jsonl_gz(first).equals(table)
    with gzip.open(first, "rt") as f:
        line = f.readline()
    assert line.startswith('{"id":') and '"date":"20' in line


def test_parquet_round_trips(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = generate(CorpusSpec(num_docs=300, seed=9, mean_chars=300))
    synth.write_parquet(table, tmp_path / "c.parquet")
    assert pq.read_table(tmp_path / "c.parquet").equals(table)


def test_the_synthetic_sample_is_sound(tmp_path: Path) -> None:
    """The synthetic corpus that was the shipped sample (scripts/make_sample_corpus.py
    --num-docs 3000 --seed 7; data/sample/ now holds real text): 3,000 unique ids and
    planted clusters of every kind."""
    script = script_module.load("make_sample_corpus")
    out = tmp_path / "corpus.jsonl.gz"
    assert script.main(["--num-docs", "3000", "--seed", "7", "--out", str(out)]) == 0
    table = synth.read_jsonl_gz(out)
    assert table.num_rows == 3000
    ids = table.column("id").to_pylist()
    assert len(set(ids)) == 3000
    targets = [t for t in table.column("target_jaccard").to_pylist() if t is not None]
    assert min(targets) < 0.4 and max(targets) == 1.0


def test_sample_script_writes_what_generate_makes(tmp_path: Path) -> None:
    script = script_module.load("make_sample_corpus")
    out = tmp_path / "s.jsonl.gz"
    assert script.main(["--num-docs", "40", "--seed", "3", "--out", str(out)]) == 0
    expected = tmp_path / "e.jsonl.gz"
    synth.write_jsonl_gz(generate(CorpusSpec(num_docs=40, seed=3, mean_chars=1200)), expected)
    assert out.read_bytes() == expected.read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--num-docs", "40", "--out", str(tmp_path / "s.csv")])
    assert exit_info.value.code == 2


# --------------------------------------------------------------------------- groundtruth


def test_normalize() -> None:
    assert gt.normalize("  Hello\t\tWORLD \n ok ") == "hello world ok"
    assert gt.normalize("Hello", lowercase=False) == "Hello"
    assert gt.normalize("ﬁne Ｆｕｌｌ\u00a0width") == "fine full width"  # NFKC
    assert gt.normalize("a,b. c!", strip_punctuation=True) == "a b c"
    assert gt.normalize("a+b=c $5", strip_punctuation=True) == "a b c 5"  # symbols too
    assert gt.normalize("a,b") == "a,b"
    assert gt.normalize(" \n\t ") == ""


def test_shingles() -> None:
    words = gt.shingles("A b c d e F")
    assert words == {("a", "b", "c", "d", "e"), ("b", "c", "d", "e", "f")}
    assert gt.shingles("a b c d e f", ngram=3) == {
        ("a", "b", "c"),
        ("b", "c", "d"),
        ("c", "d", "e"),
        ("d", "e", "f"),
    }
    # Fewer words than the n-gram: character n-grams of the normalized text.
    assert gt.shingles("ab  cd", char_ngram=3) == {"ab ", "b c", " cd"}
    assert gt.shingles("日本語のテキスト") == {"日本語のテ", "本語のテキ", "語のテキス", "のテキスト"}
    assert gt.shingles("Hi") == {"hi"}  # shorter than an n-gram: one shingle
    assert gt.shingles("  ") == frozenset()
    assert gt.shingles("abcd", unit="char", ngram=2) == {"ab", "bc", "cd"}
    with pytest.raises(ValueError):
        gt.shingles("x", unit="line")


def test_jaccard() -> None:
    assert gt.jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert gt.jaccard({1}, {1}) == 1.0
    assert gt.jaccard(set(), set()) == 0.0
    assert gt.jaccard({1}, set()) == 0.0


def _naive_pairs(
    ids: list[Any], texts: list[str], threshold: float, **kw: Any
) -> dict[tuple[Any, Any], float]:
    sets = [gt.shingles(t, **kw) for t in texts]
    out = {}
    for (i, a), (j, b) in itertools.combinations(zip(ids, sets, strict=True), 2):
        s = gt.jaccard(a, b)
        if s >= threshold:
            out[(min(i, j), max(i, j))] = s
    return out


_WORDS = ["ab", "cd", "Ef", "gh", "ab,", "ij", "日本", "ñ"]
_texts = st.lists(
    st.one_of(
        st.lists(st.sampled_from(_WORDS), min_size=0, max_size=12).map(" ".join),
        st.text(alphabet="abc ,.\n", max_size=12),
    ),
    min_size=0,
    max_size=14,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=_texts,
    threshold=st.sampled_from([0.05, 0.2, 1 / 3, 0.5, 0.7, 0.8, 1.0]),
    kw=st.sampled_from(
        [
            {},
            {"ngram": 2},
            {"ngram": 3, "char_ngram": 2},
            {"unit": "char", "ngram": 3},
            {"lowercase": False, "strip_punctuation": True},
        ]
    ),
)
def test_similar_pairs_equals_all_pairs(texts: list[str], threshold: float, kw: dict[str, Any]) -> None:
    ids = [1000 - 7 * i for i in range(len(texts))]  # descending: pair order is by id
    assert gt.similar_pairs(ids, texts, threshold, **kw) == _naive_pairs(ids, texts, threshold, **kw)


def test_similar_pairs_on_a_synthetic_corpus() -> None:
    table = generate(CorpusSpec(num_docs=250, seed=8, mean_chars=300, dup_fraction=0.6))
    ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
    for threshold in (0.3, 0.75):
        expected = _naive_pairs(ids, texts, threshold)
        assert expected
        assert gt.similar_pairs(ids, texts, threshold) == expected


def test_similar_pairs_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        gt.similar_pairs([1, 2], ["a", "b"], 0.0)
    with pytest.raises(ValueError):
        gt.similar_pairs([1, 1], ["a", "b"], 0.5)
    with pytest.raises(ValueError):
        gt.similar_pairs([1], ["a", "b"], 0.5)


def test_dense_rows_falls_back_exactly_on_hash_collisions(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = np.random.default_rng(0).integers(0, 3, size=(500, 3))
    as_tuples = [tuple(r) for r in rows.tolist()]
    distinct = len(set(as_tuples))

    def check(codes: np.ndarray) -> None:
        # Dense, and equal codes exactly for equal rows.
        assert set(codes.tolist()) == set(range(distinct))
        assert len(set(zip(codes.tolist(), as_tuples, strict=True))) == distinct

    check(gt._dense_rows_sorted(rows))
    check(gt._dense_rows(rows))
    # Every row hashes alike: the column check must notice and fall back.
    monkeypatch.setattr(gt, "_ROW_HASH", np.zeros(64, dtype=np.uint64))
    check(gt._dense_rows(rows))


def test_exact_pairs() -> None:
    ids = [5, 3, 9, 1, 7]
    texts = ["Hello  world", "hello world", "other", "", "HELLO\nWORLD"]
    assert gt.exact_pairs(ids, texts) == {(3, 5), (5, 7), (3, 7)}
    assert gt.exact_pairs(ids, texts, lowercase=False) == set()


def test_bfs_components() -> None:
    assert gt.bfs_components([], []) == {}
    assert gt.bfs_components([4, 2], []) == {4: 4, 2: 2}
    chain = gt.bfs_components([5, 4, 3, 2, 1], [(5, 4), (4, 3), (3, 2), (2, 1)])
    assert chain == {n: 1 for n in range(1, 6)}
    star = gt.bfs_components([10, 20, 30, 40, 7], [(30, 10), (30, 20), (30, 40)])
    assert star == {10: 10, 20: 10, 30: 10, 40: 10, 7: 7}
    # Endpoints missing from `nodes`, a self-loop, a repeated edge, two components.
    two = gt.bfs_components([8], [(9, 8), (9, 9), (2, 6), (6, 2), (6, 3)])
    assert two == {8: 8, 9: 8, 2: 2, 6: 2, 3: 2}
    assert gt.bfs_components(["b", "a"], [("b", "a")]) == {"a": "a", "b": "a"}


def test_reference_clusters() -> None:
    base = "one two three four five six seven eight"
    texts = [base, base.upper(), base + " nine", "completely different words in this one", ""]
    ids = [40, 10, 30, 20, 50]
    clusters = gt.reference_clusters(ids, texts, 0.7)
    assert clusters == {40: 10, 10: 10, 30: 10, 20: 20, 50: 50}


def test_pair_scores() -> None:
    predicted = {1: "a", 2: "a", 3: "a", 4: "b", 5: "c"}  # pairs (1,2) (1,3) (2,3)
    truth = {(2, 1), (4, 5)}
    precision, recall, f1 = gt.pair_scores(predicted, truth)
    assert (precision, recall) == (1 / 3, 1 / 2)
    assert f1 == pytest.approx(0.4)
    assert gt.pair_scores({1: 1, 2: 2}, set()) == (1.0, 1.0, 1.0)
    assert gt.pair_scores({1: 1, 2: 1}, set()) == (0.0, 1.0, 0.0)
    assert gt.cluster_pairs({1: 0, 2: 0, 3: 0}) == {(1, 2), (1, 3), (2, 3)}
