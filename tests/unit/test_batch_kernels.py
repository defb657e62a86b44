"""The per-batch kernels the Spark stages wrap (kernels/signatures.py, buckets.py, scoring.py), run on
Arrow batches without a JVM, against plain-Python references: groups and buckets that
straddle batches, batches of one row, and every way of cutting a stream into batches."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from neardup import columns as C
from neardup.kernels.buckets import bucket_edges
from neardup.kernels.scoring import GroupOrderError, score_groups, score_signature_pairs
from neardup.kernels.signatures import REASON_EMPTY, REASON_NULL, SignParams, band_keys_of, sign_batch
from neardup_testkit import hashspec, reference

PARAMS = SignParams(
    lowercase=True,
    strip_punctuation=False,
    unit="word",
    ngram=3,
    char_ngram=4,
    num_perm=16,
    seed=5,
    method="oph",
    bands=4,
    rows=4,
)


def _keys(value: bytes | None) -> list[int] | None:
    """A `_bands` value (binary of little-endian int64 keys) as a list."""
    return None if value is None else np.frombuffer(value, dtype="<i8").tolist()


def cut(table: pa.Table, sizes: list[int]) -> Iterator[pa.RecordBatch]:
    """The table's rows as consecutive record batches of the given sizes (cycled)."""
    start, i = 0, 0
    while start < table.num_rows:
        n = sizes[i % len(sizes)]
        yield from table.slice(start, n).combine_chunks().to_batches()
        start += n
        i += 1


# --- signing ----------------------------------------------------------------------------


def _signed_reference(text: str | None, p: SignParams) -> dict[str, Any]:
    if text is None:
        return {"reason": REASON_NULL, "len": 0, "bands": None}
    norm = reference.normalize(text, p.lowercase, p.strip_punctuation)
    hashes = [
        hashspec.shingle_hash(s, p.seed) for s in hashspec.shingles(norm, p.unit, p.ngram, p.char_ngram)
    ]
    hi, lo = (v - (1 << 64) if v >= 1 << 63 else v for v in hashspec.text_hash(norm))
    if not norm:
        return {"reason": REASON_EMPTY, "len": len(text), "bands": None, "thash": hi, "thash_lo": lo}
    sig = hashspec.oph(hashes, p.num_perm, p.seed)
    return {
        "reason": None,
        "len": len(text),
        "bands": hashspec.band_keys(sig, p.bands, p.rows, p.seed),
        "thash": hi,
        "thash_lo": lo,
    }


@pytest.mark.parametrize("rows_per_batch", [1, 3, 100])
def test_sign_batch_matches_the_reference(rows_per_batch: int) -> None:
    texts = [
        "The quick brown fox jumps over the lazy dog",
        None,
        "   ",
        "\u00a0\u3000",
        "short",
        "Ünïcödé  and   spaces\tand\nlines here",
        "日本語のテキスト",
        "The QUICK brown fox jumps over the lazy dog",
    ]
    ids = [10 * i + 7 for i in range(len(texts))]
    table = pa.table(
        {
            C.DOC_ID: pa.array(ids, pa.int64()),
            C.TEXT: pa.array(texts, pa.string()),
            C.RANK: pa.nulls(len(texts), pa.int64()),
        }
    )
    out = pa.Table.from_batches(
        [sign_batch(b, PARAMS, keep_signatures=True) for b in cut(table, [rows_per_batch])]
    )
    assert out.column_names == [
        C.DOC_ID,
        C.TEXT_HASH,
        C.TEXT_HASH_LO,
        C.REASON,
        C.LENGTH,
        C.BYTES,
        C.RANK,
        C.BAND_KEYS,
        C.SIG,
    ]
    rows = out.to_pylist()
    for text, i, row in zip(texts, ids, rows, strict=True):
        want = _signed_reference(text, PARAMS)
        assert row[C.DOC_ID] == i
        assert (row[C.REASON], row[C.LENGTH], _keys(row[C.BAND_KEYS])) == (
            want["reason"],
            want["len"],
            want["bands"],
        ), text
        # UTF-8 bytes, not characters: the texts include accented letters and Japanese.
        assert row[C.BYTES] == (0 if text is None else len(text.encode("utf-8"))), text
        if text is not None:
            assert (row[C.TEXT_HASH], row[C.TEXT_HASH_LO]) == (want["thash"], want["thash_lo"])
        assert (row[C.SIG] is None) == (want["bands"] is None)
    # Case and spacing differences normalize away: the first and last are exact copies.
    assert rows[0][C.TEXT_HASH] == rows[-1][C.TEXT_HASH] and rows[0][C.BAND_KEYS] == rows[-1][C.BAND_KEYS]
    # band_keys_of reads the column back: the rows with keys, and their keys.
    signed_rows, matrix = band_keys_of(out.column(C.BAND_KEYS))
    assert signed_rows.tolist() == [i for i, row in enumerate(rows) if row[C.BAND_KEYS] is not None]
    assert matrix.tolist() == [_keys(rows[i][C.BAND_KEYS]) for i in signed_rows]
    assert band_keys_of(out.column(C.BAND_KEYS).slice(1))[0].tolist() == [i - 1 for i in signed_rows if i]
    # The signature column: num_perm little-endian uint32 slots.
    norm = reference.normalize(texts[0])
    hashes = [hashspec.shingle_hash(s, PARAMS.seed) for s in hashspec.shingles(norm, "word", 3, 4)]
    sig = np.frombuffer(rows[0][C.SIG], dtype="<u4")
    assert sig.tolist() == hashspec.oph(hashes, PARAMS.num_perm, PARAMS.seed)


def test_sign_batch_without_signatures_has_no_sig_column() -> None:
    batch = pa.record_batch(
        {C.DOC_ID: pa.array(["a"]), C.TEXT: pa.array(["one two three four"]), C.RANK: pa.array([3.5])}
    )
    out = sign_batch(batch, PARAMS, keep_signatures=False)
    assert C.SIG not in out.schema.names and out.column(C.RANK).to_pylist() == [3.5]


# --- buckets -> edges ---------------------------------------------------------------------


def _bucket_rows(rng: random.Random, docs: int) -> pa.Table:
    """Band rows of shared buckets, as the stage's window and sort leave them."""
    buckets: dict[int, list[int]] = defaultdict(list)
    for d in range(docs):
        for band in range(3):
            key = band * 1000 + (rng.randrange(40) if band < 2 else (7 if d % 4 == 0 else 100 + d))
            buckets[key].append(d * 3 + 1)  # sparse ids
    rows = []
    for key in sorted(buckets):
        members = sorted(buckets[key])
        if len(members) > 1:
            rows += [(key, m, len(members), members[0]) for m in members]
    cols = list(zip(*rows, strict=True))
    return pa.table(
        {
            C.BAND_KEY: pa.array(cols[0], pa.int64()),
            C.DOC_ID: pa.array(cols[1], pa.int64()),
            C.BUCKET_SIZE: pa.array(cols[2], pa.int64()),
            C.BUCKET_MIN: pa.array(cols[3], pa.int64()),
        }
    )


def _expected_edges(rows: pa.Table, cap: int) -> set[tuple[int, int, bool]]:
    """(src, dst, from a star) of every bucket."""
    buckets: dict[int, list[int]] = defaultdict(list)
    for key, doc in zip(rows.column(C.BAND_KEY).to_pylist(), rows.column(C.DOC_ID).to_pylist(), strict=True):
        buckets[key].append(doc)
    edges: set[tuple[int, int, bool]] = set()
    for members in buckets.values():
        members.sort()
        if len(members) <= cap:
            edges.update((a, b, False) for a, b in itertools.combinations(members, 2))
        else:
            edges.update((members[0], m, True) for m in members[1:])
    return edges


@pytest.mark.parametrize("cap", [1, 3, 32])
@pytest.mark.parametrize("sizes", [[1], [2, 1, 5], [7], [100_000]])
def test_bucket_edges_for_every_cut_of_the_stream(cap: int, sizes: list[int]) -> None:
    rows = _bucket_rows(random.Random(cap), 200)
    assert max(rows.column(C.BUCKET_SIZE).to_pylist()) > 32  # a large bucket: a star
    got = [
        (a, b, star)
        for batch in bucket_edges(cut(rows, sizes), cap)
        for a, b, star in zip(
            batch.column(C.SRC).to_pylist(),
            batch.column(C.DST).to_pylist(),
            batch.column(C.STAR).to_pylist(),
            strict=True,
        )
    ]
    assert all(a < b for a, b, _ in got)
    assert set(got) == _expected_edges(rows, cap)


# --- verification -----------------------------------------------------------------------


def _groups(rng: random.Random) -> tuple[pa.Table, dict[tuple[str, str], float]]:
    """Rows (_group, _id, _text) sorted by (group, id), and the reference Jaccard of each edge."""
    vocab = [f"w{i}" for i in range(60)]
    base = [rng.choice(vocab) for _ in range(40)]
    texts = {}
    for d in range(30):
        words = list(base)
        for _ in range(rng.choice([0, 1, 3, 6, 20])):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        texts[f"d{d:02d}"] = " ".join(words)
    ids = sorted(texts)
    edges = set()
    for _ in range(25):
        bucket = sorted(rng.sample(ids, rng.randint(2, 9)))
        edges.update((bucket[0], m) for m in bucket[1:])
    edges.update(("d00", m) for m in ids[1:])  # one group of 29 members: it spans batches
    rows = sorted({(a, a) for a, _ in edges} | set(edges))
    table = pa.table(
        {
            C.GROUP: pa.array([g for g, _ in rows]),
            C.DOC_ID: pa.array([d for _, d in rows]),
            C.TEXT: pa.array([texts[d] for _, d in rows]),
        }
    )
    sets = {i: reference.shingles(t, "word", 3, 4) for i, t in texts.items()}
    return table, {(a, b): reference.jaccard(sets[a], sets[b]) for a, b in edges}


@pytest.mark.parametrize("sizes", [[1], [2, 1, 4], [5], [100_000]])
def test_score_groups_carries_open_groups_across_batches(sizes: list[int]) -> None:
    table, want = _groups(random.Random(12))
    threshold = 0.5
    assert 0 < sum(j >= threshold for j in want.values()) < len(want)
    out = [b for b in score_groups(cut(table, sizes), PARAMS, threshold) if len(b)]
    got = {
        (a, b): s
        for batch in out
        for a, b, s in zip(
            batch.column(C.SRC).to_pylist(),
            batch.column(C.DST).to_pylist(),
            batch.column(C.SIMILARITY).to_pylist(),
            strict=True,
        )
    }
    assert got.keys() == {e for e, j in want.items() if j >= threshold}
    assert all(got[e] == pytest.approx(want[e], abs=1e-12) for e in got)


def _in_parts(table: pa.Table, rng: random.Random, tasks: int) -> list[pa.Table]:
    """The groups' rows as the stage spreads a large star: each group cut in 1 to 4 parts,
    every member in one part and the source's row in each; each part sent to one of `tasks`
    tasks, whose rows are sorted by (group, id), so parts meeting in a task make one group
    whose source row repeats."""
    rows = table.to_pylist()
    parts_of = {g: rng.randint(1, 4) for g in {r[C.GROUP] for r in rows}}
    task_of = {(g, k): rng.randrange(tasks) for g, n in parts_of.items() for k in range(n)}
    out: list[list[dict[str, Any]]] = [[] for _ in range(tasks)]
    for r in rows:
        g, d = r[C.GROUP], r[C.DOC_ID]
        for k in range(parts_of[g]) if d == g else [rng.randrange(parts_of[g])]:
            out[task_of[(g, k)]].append(r)
    return [
        pa.Table.from_pylist(sorted(t, key=lambda r: (r[C.GROUP], r[C.DOC_ID])), table.schema) for t in out
    ]


@pytest.mark.parametrize("tasks", [1, 3])
@pytest.mark.parametrize("sizes", [[1], [2, 1, 4], [5], [100_000]])
def test_score_groups_scores_a_group_in_parts(sizes: list[int], tasks: int) -> None:
    table, want = _groups(random.Random(12))
    parted = _in_parts(table, random.Random(len(sizes)), tasks)
    assert sum(t.num_rows for t in parted) > table.num_rows  # sources repeated: parts there are
    threshold = 0.5
    got: dict[tuple[str, str], float] = {}
    for rows in parted:
        for batch in score_groups(cut(rows, sizes), PARAMS, threshold):
            columns = (batch.column(c).to_pylist() for c in (C.SRC, C.DST, C.SIMILARITY))
            for a, b, sim in zip(*columns, strict=True):
                assert (a, b) not in got  # each edge from one part only
                got[(a, b)] = sim
    assert got.keys() == {e for e, j in want.items() if j >= threshold}
    assert all(got[e] == pytest.approx(want[e], abs=1e-12) for e in got)


def test_score_groups_refuses_unsorted_rows() -> None:
    table, _ = _groups(random.Random(3))
    shuffled = table.take(pa.array(np.random.default_rng(0).permutation(table.num_rows)))
    with pytest.raises(GroupOrderError):
        list(score_groups(cut(shuffled, [4]), PARAMS, 0.5))


def test_score_signature_pairs_is_the_fraction_of_equal_slots() -> None:
    k = 8
    a = np.arange(3 * k, dtype="<u4").reshape(3, k)
    b = a.copy()
    b[1, :3] += 1  # 5 of 8 equal
    b[2, :] += 1  # none equal
    batch = pa.record_batch(
        {
            C.SRC: pa.array([1, 2, 3]),
            C.DST: pa.array([4, 5, 6]),
            C.SIG_A: pa.array([r.tobytes() for r in a], pa.binary()),
            C.SIG_B: pa.array([r.tobytes() for r in b], pa.binary()),
        }
    )
    out = score_signature_pairs(batch, k, 0.6)
    assert out.to_pylist() == [
        {C.SRC: 1, C.DST: 4, C.SIMILARITY: 1.0},
        {C.SRC: 2, C.DST: 5, C.SIMILARITY: 0.625},
    ]
