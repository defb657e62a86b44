"""MinHash signatures and band keys against Python-int references and statistical facts."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.hashing import shingle_hashes
from neardup.kernels.minhash import (
    EMPTY_SLOT,
    MERSENNE_61,
    _classic_segment,
    band_keys,
    estimate_jaccard,
    permutations,
    signatures,
)
from neardup_testkit import hashspec

P = hashspec.P
M64 = hashspec.M64
M32 = hashspec.M32
ref_splitmix64 = hashspec.splitmix64
ref_fmix64 = hashspec.fmix64
ref_perms = hashspec.permutations
ref_classic = hashspec.classic
ref_oph = hashspec.oph
ref_band_keys = hashspec.band_keys


def random_texts(seed: int, count: int) -> list[str | None]:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijé日本😀") for _ in range(rng.randint(1, 6))) for _ in range(30)]
    out: list[str | None] = []
    for i in range(count):
        if i % 17 == 3:
            out.append(None)
        elif i % 13 == 5:
            out.append("")
        else:
            out.append(" ".join(rng.choice(vocab) for _ in range(rng.choice([1, 2, 4, 7, 20, 60]))))
    return out


# ------------------------------------------------------------------------------------------
# Permutations and the exact mulmod


def test_permutations_ranges_and_reference() -> None:
    a, b = permutations(300, 12345)
    assert a.dtype == np.uint64 and b.dtype == np.uint64 and a.shape == b.shape == (300,)
    assert MERSENNE_61 == P
    assert int(a.min()) >= 1 and int(a.max()) <= P - 1
    assert int(b.max()) <= P - 1
    ra, rb = ref_perms(300, 12345)
    assert a.tolist() == ra and b.tolist() == rb
    a2, _ = permutations(300, 12346)
    assert not set(a.tolist()) & set(a2.tolist())


EXTREME_X = [
    0, 1, 2, P - 2, P - 1, P, P + 1, 2 * P - 1, 2 * P, 2 * P + 1, 1 << 61, (1 << 62) - 1,
    1 << 62, 1 << 63, M64, M64 - 1, M64 - P, (1 << 32) - 1, 1 << 32, (1 << 32) + 1,
    (1 << 29) - 1, 1 << 29, 0xFFFFFFFF00000000, 0x1FFFFFFF_FFFFFFFF, 0xDEADBEEFCAFEBABE,
]  # fmt: skip
EXTREME_A = [
    1, 2, 3, P - 1, P - 2, P - 3, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, 1 << 60,
    (1 << 60) + 1, (1 << 61) - 2, ((1 << 29) - 1) << 32, (1 << 29) - 1, 0x1FFFFFFF00000001,
]  # fmt: skip
EXTREME_B = [0, 1, P - 1, P - 2, 1 << 60, (1 << 32) - 1]


def test_classic_mulmod_is_exact() -> None:
    rng = random.Random(2024)
    a_vals = EXTREME_A + [rng.randrange(1, P) for _ in range(49)]
    b_vals = [EXTREME_B[i % len(EXTREME_B)] if i < 30 else rng.randrange(P) for i in range(len(a_vals))]
    xs = EXTREME_X + [rng.getrandbits(64) for _ in range(300)] + [rng.randrange(P) for _ in range(100)]
    a = np.array(a_vals, dtype=np.uint64)
    b = np.array(b_vals, dtype=np.uint64)
    a_lo, a_hi = a & np.uint64(M32), a >> np.uint64(32)
    hs = np.array(xs, dtype=np.uint64)
    k = len(a_vals)
    mins = np.empty(k, dtype=np.uint64)
    row = np.empty(k, dtype=np.uint32)
    for t, x in enumerate(xs):
        # A one-element set: the kernel's 61-bit minima are the hash values themselves.
        _classic_segment(hs, t, t + 1, a_lo, a_hi, b, mins, row)
        want = [(ai * (x % P) + bi) % P for ai, bi in zip(a_vals, b_vals, strict=True)]
        assert mins.tolist() == want, hex(x)
        assert row.tolist() == [w & M32 for w in want]
    _classic_segment(hs, 0, len(xs), a_lo, a_hi, b, mins, row)
    want_min = [min((ai * (x % P) + bi) % P for x in xs) for ai, bi in zip(a_vals, b_vals, strict=True)]
    assert mins.tolist() == want_min


def test_wrapping_multiplication_would_differ() -> None:
    """Guard the test above: the values it checks are ones where uint64 wrapping is wrong."""
    wrong = 0
    for a in EXTREME_A:
        for x in EXTREME_X:
            wrong += ((a * (x % P)) & M64) % P != (a * (x % P)) % P
    assert wrong > 50


# ------------------------------------------------------------------------------------------
# Signatures


@pytest.mark.parametrize("method", ["classic", "oph"])
@pytest.mark.parametrize(
    ("unit", "n", "char_n"), [("word", 3, 4), ("word", 5, 5), ("char", 5, 0), ("word", 1, 2)]
)
def test_signatures_match_reference_over_shingle_sets(method: str, unit: str, n: int, char_n: int) -> None:
    """A signature is the reference MinHash of the document's set of shingle hashes,
    whatever the string layout (int32 or int64 offsets, sliced)."""
    texts = random_texts(n * 31 + char_n, 60)
    ref = ref_classic if method == "classic" else ref_oph
    k, seed = 48, 777
    for arr in (pa.array(texts, pa.string()), pa.array(texts, pa.large_string()).slice(7, 40)):
        got = signatures(arr, unit=unit, ngram=n, char_ngram=char_n, num_perm=k, seed=seed, method=method)
        assert got.dtype == np.uint32 and got.shape == (len(arr), k)
        o, h = shingle_hashes(arr, unit, n, char_n, seed)
        for i in range(len(arr)):
            assert got[i].tolist() == ref(h[o[i] : o[i + 1]].tolist(), k, seed), i


@pytest.mark.parametrize("method", ["classic", "oph"])
def test_order_and_duplicates_do_not_matter(method: str) -> None:
    words = [f"w{i}" for i in range(40)]
    base = " ".join(words)
    # The same set of word bigrams, in another order and with repeats.
    shuffled = " ".join([*words[20:], "w19", *words[:20], *words[:10]])
    sigs = signatures(
        pa.array([base, shuffled]), unit="word", ngram=1, char_ngram=1, num_perm=64, seed=1, method=method
    )
    assert sigs[0].tolist() == sigs[1].tolist()


def test_empty_documents_get_the_sentinel() -> None:
    arr = pa.array(["", None, "a b c"], pa.string())
    for method in ("classic", "oph"):
        sigs = signatures(arr, unit="word", ngram=2, char_ngram=3, num_perm=16, seed=0, method=method)
        assert sigs[0].tolist() == [EMPTY_SLOT] * 16 and sigs[1].tolist() == [EMPTY_SLOT] * 16
        assert (sigs == EMPTY_SLOT).all(axis=1).tolist() == [True, True, False]


def test_single_shingle_oph_fills_every_bin_with_it() -> None:
    sig = signatures(
        pa.array(["lonely"]), unit="word", ngram=1, char_ngram=1, num_perm=32, seed=4, method="oph"
    )
    assert len(set(sig[0].tolist())) == 1


def test_stable_signature_values() -> None:
    arr = pa.array(["the quick brown fox jumps over the lazy dog"])
    kw = {"unit": "word", "ngram": 3, "char_ngram": 5, "num_perm": 8, "seed": 7}
    assert signatures(arr, method="classic", **kw)[0].tolist() == EXPECTED_CLASSIC  # type: ignore[arg-type]
    assert signatures(arr, method="oph", **kw)[0].tolist() == EXPECTED_OPH  # type: ignore[arg-type]


# Produced once by the kernels after they matched the Python references above.
EXPECTED_CLASSIC = [
    3897470489,
    2743443682,
    2750725084,
    187407628,
    2256574620,
    261035896,
    3392044055,
    306303655,
]
EXPECTED_OPH = [
    3939950913,
    1566148154,
    2254349124,
    985580079,
    938718112,
    1566148154,
    301951285,
    985580079,
]


def test_invalid_arguments() -> None:
    arr = pa.array(["a b c"])
    kw = {"unit": "word", "ngram": 2, "char_ngram": 3, "num_perm": 8, "seed": 0}
    with pytest.raises(ValueError):
        signatures(arr, method="bbit", **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        signatures(arr, method="oph", **{**kw, "num_perm": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        signatures(arr, method="oph", **{**kw, "unit": "token"})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# Estimator statistics


@pytest.mark.parametrize(
    ("method", "set_size", "lo", "hi"),
    [("classic", 1000, 0.8, 1.2), ("oph", 1000, 0.6, 1.25), ("oph", 150, 0.6, 1.25)],
)
@pytest.mark.parametrize("jaccard", [0.2, 0.5, 0.8, 0.95])
def test_estimator_unbiased_with_binomial_spread(
    method: str, set_size: int, lo: float, hi: float, jaccard: float
) -> None:
    k, pairs = 128, 400
    rng = np.random.default_rng(int(jaccard * 1000) + set_size)
    shared = round(jaccard * set_size)
    only = set_size - shared
    only_a = only // 2
    only_b = only - only_a
    exact_j = shared / set_size
    # Pair p: A = S_p + X_p, B = S_p + Y_p, every word distinct: word 1-grams are the sets.
    salt = int(rng.integers(1 << 30))
    texts = []
    for p in range(pairs):
        words = [f"p{salt}x{p}w{i}" for i in range(shared + only_a + only_b)]
        texts.append(" ".join(words[: shared + only_a]))
        texts.append(" ".join(words[:shared] + words[shared + only_a :]))
    sigs = signatures(pa.array(texts), unit="word", ngram=1, char_ngram=1, num_perm=k, seed=11, method=method)
    est = estimate_jaccard(sigs[0::2], sigs[1::2])
    assert est.shape == (pairs,) and est.dtype == np.float64
    sd = np.sqrt(exact_j * (1 - exact_j) / k)
    assert abs(est.mean() - exact_j) < 4 * sd / np.sqrt(pairs), (est.mean(), exact_j)
    ratio = est.std(ddof=1) / sd
    print(f"{method} |S|={set_size} J={jaccard}: mean {est.mean():.4f} sd ratio {ratio:.3f}")
    assert lo <= ratio <= hi, ratio


# ------------------------------------------------------------------------------------------
# Band keys and the estimator helper


def test_band_keys_reference_and_locality() -> None:
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32, size=(6, 24), dtype=np.uint32)
    sigs[3] = sigs[0]
    bands, rows = 5, 4  # 20 of 24 slots used
    keys = band_keys(sigs, bands, rows, seed=42)
    assert keys.dtype == np.int64 and keys.shape == (6, bands)
    for i in range(6):
        assert keys[i].tolist() == ref_band_keys(sigs[i].tolist(), bands, rows, 42)
    assert keys[3].tolist() == keys[0].tolist()
    changed = sigs[0].copy()
    changed[9] ^= 1  # slot 9 lies in band 2
    k2 = band_keys(changed[None, :], bands, rows, seed=42)[0]
    assert [k2[j] == keys[0][j] for j in range(bands)] == [True, True, False, True, True]
    changed = sigs[0].copy()
    changed[22] += 1  # outside every band
    assert band_keys(changed[None, :], bands, rows, seed=42)[0].tolist() == keys[0].tolist()
    assert band_keys(sigs, bands, rows, seed=43)[0].tolist() != keys[0].tolist()


def test_band_index_is_mixed_in() -> None:
    sig = np.full((1, 12), 77, dtype=np.uint32)
    keys = band_keys(sig, 3, 4, seed=0)[0].tolist()
    assert len(set(keys)) == 3


def test_band_keys_accept_signed_views() -> None:
    rng = np.random.default_rng(1)
    sigs = rng.integers(0, 2**32, size=(10, 16), dtype=np.uint32)
    a = band_keys(sigs, 4, 4, seed=5)
    assert band_keys(sigs.view(np.int32), 4, 4, seed=5).tolist() == a.tolist()
    assert band_keys(sigs.astype(np.int64), 4, 4, seed=5).tolist() == a.tolist()
    with pytest.raises(ValueError):
        band_keys(sigs, 5, 4, seed=5)


def test_estimate_jaccard_counts_equal_slots() -> None:
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.uint32)
    b = np.array([[1, 2, 0, 4], [0, 0, 0, 0]], dtype=np.uint32)
    assert estimate_jaccard(a, b).tolist() == [0.75, 0.0]
    assert estimate_jaccard(a, a).tolist() == [1.0, 1.0]
