"""kernels/contamination.py without a JVM: word n-gram hashes against the hash definitions in plain
Python (hashspec), whole batches against the brute-force reference (contamination.py),
short, empty and Unicode texts, batches cut every way, hash collisions, and the
reference's round trip through its broadcast bytes."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from neardup import columns as C
from neardup.kernels.contamination import (
    NGRAM,
    REF,
    DeconParams,
    Reference,
    build_reference,
    cached_reference,
    decontaminate_batch,
    ngram_hashes,
    reference_bytes,
    reference_from_bytes,
)
from neardup.kernels.signatures import REASON_EMPTY, REASON_NULL, SignParams
from neardup.kernels.textnorm import normalize
from neardup_testkit import hashspec
from neardup_testkit.contamination import expected_matches, rejected_ids, words

SIGN = SignParams(
    lowercase=True,
    strip_punctuation=False,
    unit="word",
    ngram=5,
    char_ngram=5,
    num_perm=128,
    seed=42,
    method="oph",
    bands=18,
    rows=5,
)
PARAMS = DeconParams(SIGN, ngram=13, threshold=0.8, verify="exact")

UNICODE = [
    "Ｆｕｌｌ ｗｉｄｔｈ letters fold under NFKC into plain ones and so the words match the reference",
    "Café naïve résumé façade coöperate señor über straße ﬁnance Ωmega ΑΘΗΝΑ déjà vu encore une fois",
    "中文没有空格所以整段是一个词 and then some english words follow it to make up enough words here",
    "emoji 🙂 count as words when spaced 🚀 out like this 🎉 and they go through normalization unchanged ok",
]


def _words(rng: random.Random, n: int, vocab: int = 40) -> list[str]:
    return [f"w{rng.randrange(vocab)}" for _ in range(n)]


@pytest.mark.parametrize("n", [1, 3, 13])
def test_ngram_hashes_are_the_word_shingle_hashes_in_text_order(n: int) -> None:
    rng = random.Random(n)
    texts = [" ".join(_words(rng, rng.randrange(0, 40))) for _ in range(60)] + [*UNICODE, "", "one"]
    norm = normalize(pa.array(texts))
    offsets, hashes = ngram_hashes(norm, n, SIGN.seed)
    assert len(offsets) == len(texts) + 1
    for i, text in enumerate(norm.to_pylist()):
        w = text.split(" ") if text else []
        # Documents shorter than n words have no n-gram (no character fallback, unlike shingles).
        want = [hashspec.shingle_hash(("w", *w[j : j + n]), SIGN.seed) for j in range(len(w) - n + 1)]
        assert hashes[offsets[i] : offsets[i + 1]].tolist() == want, text


def _rows(batch: pa.RecordBatch, items: list[Any]) -> dict[tuple[Any, Any, str], Any]:
    """The kernel's match rows as (doc, reference id, reason) -> similarity or n-gram."""
    out = {}
    for r in batch.to_pylist():
        if r[REF] is not None:
            value = r[C.SIMILARITY] if r[C.REASON] == "near_duplicate" else r[NGRAM]
            key = (r[C.DOC_ID], items[r[REF]], r[C.REASON])
            assert key not in out, f"{key} reported twice"
            out[key] = value
    return out


def _rejected(batch: pa.RecordBatch) -> dict[Any, str]:
    return {r[C.DOC_ID]: r[C.REASON] for r in batch.to_pylist() if r[REF] is None}


def _compare(docs: dict[int, str | None], refs: dict[str, str | None], p: DeconParams) -> pa.RecordBatch:
    items = sorted(refs)
    ref = build_reference(pa.array([refs[i] for i in items], pa.string()), p)
    batch = pa.record_batch(
        {C.DOC_ID: pa.array(list(docs), pa.int64()), C.TEXT: pa.array(list(docs.values()))}
    )
    out = decontaminate_batch(batch, ref, p)
    want = expected_matches(docs, refs, p.ngram or None, p.threshold)
    got = _rows(out, items)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value) if isinstance(value, float) else got[key] == value
    return out


def test_batch_matches_the_brute_force_reference() -> None:
    rng = random.Random(7)
    refs: dict[str, str | None] = {f"r{i}": " ".join(_words(rng, rng.randrange(5, 120))) for i in range(25)}
    refs |= {"empty": "", "null": None, "short": "too short to hold thirteen words"}
    refs |= dict(enumerate(UNICODE))
    refs = {str(k): v for k, v in refs.items()}
    shared = "one two three four five six seven eight nine ten eleven twelve thirteen"
    refs |= {"s1": f"alpha {shared} omega", "s2": f"{shared} beta gamma"}  # one n-gram, two items
    docs: dict[int, str | None] = {}
    for i in range(200):
        w = _words(rng, rng.randrange(0, 80))
        pick = rng.choice([t for t in refs.values() if t])
        rw = words(pick)
        if rng.random() < 0.4 and len(rw) >= 13:
            s = rng.randrange(len(rw) - 12)
            at = rng.randrange(len(w) + 1)
            w[at:at] = rw[s : s + rng.choice([12, 13, 14, 20])]
        docs[i] = " ".join(w)
    docs |= {1000: None, 1001: "", 1002: " \n\t ", 1003: shared.upper(), 1004: f"x {shared} y {shared}"}
    docs |= {2000 + i: t for i, t in enumerate(UNICODE)}
    docs[3000] = refs["r3"]  # a whole copy: both reasons
    docs[3001] = "ＡＬＰＨＡ " + shared.title()  # NFKC and case folded
    out = _compare(docs, refs, PARAMS)
    want = {i: REASON_NULL if docs[i] is None else REASON_EMPTY for i in rejected_ids(docs)}
    assert _rejected(out) == want and {1000, 1001, 1002} <= want.keys()
    # The planted cases are among the matches the reference found.
    got = _rows(out, sorted(refs))
    assert {(1003, "s1", "ngram"), (1003, "s2", "ngram"), (3000, "r3", "near_duplicate")} <= got.keys()
    assert got[(1004, "s1", "ngram")] == shared
    assert got[(3001, "s1", "ngram")] == "alpha " + shared.removesuffix(" thirteen")  # the first one
    assert {(2000 + i, str(i), "ngram") for i in range(len(UNICODE))} <= got.keys()


def test_only_ngrams_or_only_near_duplicates() -> None:
    rng = random.Random(3)
    refs: dict[str, str | None] = {f"r{i}": " ".join(_words(rng, 60, 200)) for i in range(5)}
    docs: dict[int, str | None] = {0: refs["r0"], 1: " ".join(words(refs["r1"])[10:23]), 2: "nothing"}
    ngram_only = _compare(docs, refs, dataclasses.replace(PARAMS, threshold=None))
    assert set(ngram_only.column(C.REASON).to_pylist()) == {"ngram"}
    near_only = _compare(docs, refs, dataclasses.replace(PARAMS, ngram=0))
    assert set(near_only.column(C.REASON).to_pylist()) == {"near_duplicate"}


def test_signature_verification_is_the_estimate_of_the_hash_definitions() -> None:
    """Candidates share a band key and score the fraction of equal slots: both computed
    here from the definitions in plain Python (hashspec), not by the kernels."""
    rng = random.Random(11)
    p = dataclasses.replace(PARAMS, ngram=0, verify="signature", threshold=0.5)
    base = [_words(rng, 80, 500) for _ in range(6)]
    refs: dict[str, str | None] = {f"r{i}": " ".join(w) for i, w in enumerate(base)}
    docs: dict[int, str | None] = {}
    for i in range(60):
        w = list(base[i % 6])
        for _ in range(rng.randrange(0, 12)):
            w[rng.randrange(len(w))] = f"e{rng.randrange(10**6)}"
        docs[i] = " ".join(w)

    def signature(text: str) -> list[int]:
        sh = hashspec.shingles(text, SIGN.unit, SIGN.ngram, SIGN.char_ngram)
        return hashspec.oph([hashspec.shingle_hash(s, SIGN.seed) for s in sh], SIGN.num_perm, SIGN.seed)

    want = {}
    for d, dt in docs.items():
        ds = signature(str(dt))
        for r, rt in refs.items():
            rs = signature(str(rt))
            shared = set(hashspec.band_keys(ds, SIGN.bands, SIGN.rows, SIGN.seed)) & set(
                hashspec.band_keys(rs, SIGN.bands, SIGN.rows, SIGN.seed)
            )
            est = sum(a == b for a, b in zip(ds, rs, strict=True)) / SIGN.num_perm
            if shared and est >= p.threshold:
                want[(d, r, "near_duplicate")] = est
    items = sorted(refs)
    ref = build_reference(pa.array([refs[i] for i in items]), p)
    batch = pa.record_batch(
        {C.DOC_ID: pa.array(list(docs), pa.int64()), C.TEXT: pa.array(list(docs.values()))}
    )
    assert _rows(decontaminate_batch(batch, ref, p), items) == want
    assert len(want) > 20


def test_batches_cut_every_way_give_the_same_rows() -> None:
    rng = random.Random(5)
    refs = [" ".join(_words(rng, 50, 60)) for _ in range(8)]
    ref = build_reference(pa.array(refs), PARAMS)
    texts = []
    for i in range(40):
        w = _words(rng, rng.randrange(0, 50), 60)
        if i % 3 == 0:
            w[5:5] = words(refs[i % 8])[3:17]
        texts.append(" ".join(w) if i % 11 else None)
    table = pa.table({C.DOC_ID: pa.array(range(40), pa.int64()), C.TEXT: pa.array(texts)})

    def rows(batches: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
        found = [tuple(r.values()) for b in batches for r in decontaminate_batch(b, ref, PARAMS).to_pylist()]
        return sorted(found, key=repr)

    whole = rows(table.to_batches())
    assert len(whole) > 10
    for size in (1, 2, 3, 7, 39):
        cut = [table.slice(s, size).to_batches()[0] for s in range(0, 40, size)]
        assert rows(cut) == whole, size


def test_a_hash_collision_is_not_a_match() -> None:
    """A reference n-gram given the hash of another n-gram: the document's n-gram hits the
    hash, and its words, compared byte for byte, reject it."""
    ref_text = " ".join(f"a{i}" for i in range(13))
    doc_text = " ".join(f"b{i}" for i in range(13))
    ref = build_reference(pa.array([ref_text]), PARAMS)
    _, doc_hash = ngram_hashes(normalize(pa.array([doc_text])), 13, SIGN.seed)
    collided = dataclasses.replace(ref, gram_hash=doc_hash.copy())  # one entry: still sorted
    batch = pa.record_batch({C.DOC_ID: pa.array([1]), C.TEXT: pa.array([doc_text])})
    assert decontaminate_batch(batch, collided, PARAMS).num_rows == 0
    # Bytes that are the n-gram's but run on into a longer word are not the n-gram either.
    longer = build_reference(pa.array([doc_text + "x"]), PARAMS)
    assert longer.ngrams == 1 and decontaminate_batch(batch, longer, PARAMS).num_rows == 1  # near only
    longer = dataclasses.replace(longer, gram_hash=doc_hash.copy())
    assert decontaminate_batch(batch, longer, PARAMS).column(C.REASON).to_pylist() == ["near_duplicate"]
    # The same bytes under that hash do match: only the comparison stopped it above.
    honest = build_reference(pa.array([doc_text]), PARAMS)
    reasons = decontaminate_batch(batch, honest, PARAMS).column(C.REASON).to_pylist()
    assert reasons == ["ngram", "near_duplicate"]


def _same(a: Reference, b: Reference) -> None:
    for f in dataclasses.fields(Reference):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all(), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("verify", ["exact", "signature"])
def test_reference_round_trip_through_its_bytes(verify: str) -> None:
    rng = random.Random(2)
    texts = [" ".join(_words(rng, rng.randrange(0, 90))) for _ in range(30)] + [None, "", *UNICODE]
    ref = build_reference(pa.array(texts), dataclasses.replace(PARAMS, verify=verify))
    payload = reference_bytes(ref)
    back = reference_from_bytes(payload)
    _same(ref, back)
    assert back.items == len(texts) and back.empty == 2 + sum(not t for t in texts[:30])
    # The arrays are views of the payload, not copies (each worker holds it once).
    buf = np.frombuffer(payload, dtype=np.uint8)
    assert all(np.shares_memory(getattr(back, name), buf) for name in ("gram_hash", "band_key", "text"))
    assert cached_reference("k1", lambda: payload) is cached_reference("k1", lambda: b"not read again")


def test_empty_reference_matches_nothing() -> None:
    ref = build_reference(pa.array([None, ""], pa.string()), PARAMS)
    assert ref.ngrams == 0 and len(ref.band_key) == 0 and ref.empty == 2
    batch = pa.record_batch({C.DOC_ID: pa.array(["a", "b"]), C.TEXT: pa.array(["", "some words here"])})
    out = decontaminate_batch(batch, reference_from_bytes(reference_bytes(ref)), PARAMS)
    assert out.to_pylist() == [
        {C.DOC_ID: "a", REF: None, C.REASON: REASON_EMPTY, C.SIMILARITY: None, NGRAM: None}
    ]
