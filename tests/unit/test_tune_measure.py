"""kernels/measure.py: the sample keys against the hash definitions in plain Python, and the
measured pairs against brute force: exact Jaccard from Python sets, collisions from the
job's own signing kernel, each document in one pair at most, no pair left out that the
matching could have taken, and a selection that does not depend on the job's banding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from neardup import columns as C
from neardup.kernels.measure import (
    RANDOM_PAIRS,
    TAG_SAMPLE,
    MeasuredPairs,
    derived_seed,
    measure_pairs,
    sample_keys,
)
from neardup.kernels.signatures import SignParams, band_keys_of, sign_batch
from neardup_testkit import hashspec, reference
from neardup_testkit.synth import CorpusSpec, generate

# The defaults (conf/default.yaml): lowercase, punctuation kept, word 5-grams (character
# 5-grams below 5 words), 128 OPH slots, seed 42, 18 x 5 bands.
PARAMS = SignParams(True, False, "word", 5, 5, 128, 42, "oph", 18, 5)


def test_derived_seeds_differ_from_the_job_seed_and_each_other() -> None:
    want = hashspec.splitmix64(42 ^ int.from_bytes(b"nd:sampl", "little"), 1)[0] & ((1 << 63) - 1)
    assert derived_seed(42, TAG_SAMPLE) == want != 42


def test_sample_keys_are_one_slot_minhashes_of_signable_rows() -> None:
    texts = [
        "the quick brown fox jumps over the lazy dog",
        None,
        "  \t ",
        "The  QUICK brown fox jumps over the lazy dog",  # the same after normalization
        "short",
        "Ünïcödé and spaces and lines here and more",
    ]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([10, 11, 12, 13, 14, 15], pa.int64()), pa.array(texts, pa.string())],
        names=[C.DOC_ID, C.TEXT],
    )
    out = sample_keys(batch, PARAMS)
    seed = derived_seed(PARAMS.seed, TAG_SAMPLE)
    want_ids, want_keys, want_bytes = [], [], []
    for doc_id, text in zip([10, 11, 12, 13, 14, 15], texts, strict=True):
        norm = reference.normalize(text or "")
        if not norm:
            continue
        hashes = [hashspec.shingle_hash(s, seed) for s in hashspec.shingles(norm, "word", 5, 5)]
        want_ids.append(doc_id)
        want_keys.append(hashspec.oph(hashes, 1, seed)[0])
        want_bytes.append(len(text.encode()) if text else 0)
    assert out.column(C.DOC_ID).to_pylist() == want_ids
    assert out.column(C.SAMPLE_KEY).to_pylist() == want_keys
    assert out.column(C.BYTES).to_pylist() == want_bytes
    assert want_keys[0] == want_keys[1]


@pytest.fixture(scope="module")
def texts() -> list[str | None]:
    table = generate(CorpusSpec(num_docs=500, seed=3, mean_chars=600, dup_fraction=0.6))
    words = table.column("text").to_pylist()
    # Rows the job rejects or settles as exact copies, among the generated ones.
    return [None, *words[:250], "   ", words[5], words[7].upper(), *words[250:]]


@pytest.fixture(scope="module")
def measured(texts: list[str | None]) -> MeasuredPairs:
    return measure_pairs(pa.array(texts, pa.string()), PARAMS)


def test_each_document_is_in_one_pair_at_most_and_never_a_copy(
    texts: list[str | None], measured: MeasuredPairs
) -> None:
    ends = np.concatenate([measured.left, measured.right])
    assert len(set(ends.tolist())) == ends.size
    norms = [reference.normalize(t) if t is not None else "" for t in texts]
    first: dict[str, int] = {}
    for i, norm in enumerate(norms):
        if norm:
            first.setdefault(norm, i)
    # Only the first of each normalized text can be measured; null and empty texts never.
    assert set(ends.tolist()) <= set(first.values())
    assert measured.documents == sum(1 for n in norms if n)
    assert measured.distinct == len(first)


def test_similarities_are_exact_and_collisions_are_the_jobs(
    texts: list[str | None], measured: MeasuredPairs
) -> None:
    sets = [reference.shingles(t) if t is not None else frozenset() for t in texts]
    want = [reference.jaccard(sets[a], sets[b]) for a, b in zip(measured.left, measured.right, strict=True)]
    assert measured.similarity.tolist() == pytest.approx(want, abs=1e-12)
    # The job's band keys, from its own signing kernel (tested against the hash definitions).
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(len(texts)), pa.int64()),
            pa.array(texts, pa.string()),
            pa.nulls(len(texts), pa.int64()),
        ],
        names=[C.DOC_ID, C.TEXT, C.RANK],
    )
    signed, matrix = band_keys_of(sign_batch(batch, PARAMS, keep_signatures=False).column(C.BAND_KEYS))
    keys: list[list[int]] = [[] for _ in texts]
    for row, row_keys in zip(signed.tolist(), matrix.tolist(), strict=True):
        keys[row] = row_keys
    collided = [bool(set(keys[a]) & set(keys[b])) for a, b in zip(measured.left, measured.right, strict=True)]
    assert measured.collided.tolist() == collided


def test_pairs_cover_the_range_and_the_matching_is_maximal(
    texts: list[str | None], measured: MeasuredPairs
) -> None:
    sim = measured.similarity
    # Random pairs of the documents the similar pairs left, as many as they make up to 1000.
    similar = sim.size - measured.random
    assert measured.random == min(RANDOM_PAIRS, (measured.distinct - 2 * similar) // 2) >= 50
    assert (sim >= 0.3).sum() >= similar  # the matched candidates, and rarely a random pair
    hist = np.histogram(sim[sim >= 0.3], bins=[0.3, 0.5, 0.7, 0.9, 1.0 + 1e-9])[0]
    assert (hist >= 10).all(), hist
    # Every similar pair of distinct documents (J >= 0.5: found by the selection banding
    # with probability 1 - 0.75^64) has a document in a measured pair, or the greedy
    # matching would have taken it.
    norms = {}
    for i, t in enumerate(texts):
        norm = reference.normalize(t) if t is not None else ""
        if norm:
            norms.setdefault(norm, i)
    firsts = sorted(norms.values())
    used = set(np.concatenate([measured.left, measured.right]).tolist())
    similar = reference.similar_pairs(firsts, [texts[i] for i in firsts], 0.5)
    assert similar
    for a, b in similar:
        assert a in used or b in used, (a, b)


def test_the_selection_does_not_depend_on_the_jobs_banding(
    texts: list[str | None], measured: MeasuredPairs
) -> None:
    other = measure_pairs(pa.array(texts, pa.string()), dataclasses.replace(PARAMS, bands=9, rows=10))
    assert other.left.tolist() == measured.left.tolist()
    assert other.right.tolist() == measured.right.tolist()
    assert other.similarity.tolist() == measured.similarity.tolist()


def test_fewer_than_two_documents_give_no_pairs() -> None:
    for texts in ([], ["one document only here"], ["same text", "Same  text", None]):
        m = measure_pairs(pa.array(texts, pa.string()), PARAMS)
        assert m.similarity.size == 0 and m.collided.size == 0


def test_pairs_of_a_tiny_sample_are_all_pairs_when_it_has_four_documents() -> None:
    texts = ["a b c d e f g", "a b c d e f h", "x y z w v u t", "x y z w v u s"]
    m = measure_pairs(pa.array(texts, pa.string()), PARAMS, random_pairs=0)
    got = sorted(zip(m.left.tolist(), m.right.tolist(), strict=True))
    # Two pairs of J = 2/4 each (3 word 5-grams per text, 2 shared): both are taken.
    assert got == [(0, 1), (2, 3)]
    assert m.similarity.tolist() == pytest.approx([0.5, 0.5])
