"""Shingling and hashing kernels against a pure-Python shingler and hash (Python ints).

The reference (neardup_testkit.hashspec) re-implements the definitions of the hashing
module docstring from scratch (its own SplitMix64, domain tags, byte hash and word
combination), so any drift in the numba kernels, including in the word/char
segmentation, fails here.
"""

from __future__ import annotations

import ctypes
import mmap
import random
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.hashing import _bucket_bits, _sorted_unique, shingle_hashes, splitmix64, text_hash128
from neardup_testkit.hashspec import shingle_hash, text_hash
from neardup_testkit.hashspec import shingles as ref_shingles
from neardup_testkit.hashspec import splitmix64 as ref_splitmix64

# ------------------------------------------------------------------------------------------
# Random texts

WORD_CHARS = (
    "abcdefghijklmnopqrstuvwxyz" * 3
    + "éüßçñøæœαβγδжщё"
    + "日本語中文字한국어漢字"
    + "😀🎉👍🏽"  # 4-byte code points and a skin-tone modifier
    + "\u0301\u0308\u200d"  # combining marks and ZWJ as separate code points
)


def random_word(rng: random.Random) -> str:
    return "".join(rng.choice(WORD_CHARS) for _ in range(rng.choice([1, 1, 2, 3, 4, 5, 7, 8, 9, 17])))


def random_texts(rng: random.Random, count: int, vocab_size: int = 40) -> list[str]:
    # A small vocabulary makes documents share shingles, so intersections are not all empty.
    vocab = [random_word(rng) for _ in range(vocab_size)]
    texts = []
    for _ in range(count):
        nwords = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 12, 30])
        if rng.random() < 0.15:  # CJK-like run without spaces
            texts.append("".join(rng.choice("日本語中文字漢字") for _ in range(rng.randint(0, 12))))
        else:
            texts.append(" ".join(rng.choice(vocab) for _ in range(nwords)))
    return texts


def doc_sets(offsets: np.ndarray, hashes: np.ndarray) -> list[np.ndarray]:
    return [hashes[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


CONFIGS = [
    ("word", 1, 3),
    ("word", 2, 2),
    ("word", 3, 5),
    ("word", 5, 4),
    ("char", 1, 0),
    ("char", 3, 0),
    ("char", 5, 0),
]


# ------------------------------------------------------------------------------------------
# Tests


def test_splitmix64_known_values() -> None:
    # Published first outputs of SplitMix64 seeded with 0.
    assert [int(v) for v in splitmix64(0, 3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]
    assert [int(v) for v in splitmix64(-5, 4)] == ref_splitmix64(-5, 4)


@pytest.mark.parametrize(("unit", "n", "char_n"), CONFIGS)
def test_shingle_hashes_equal_python_reference(unit: str, n: int, char_n: int) -> None:
    rng = random.Random(f"{unit}-{n}-{char_n}")
    texts = random_texts(rng, 150)
    seed = rng.getrandbits(64)
    offsets, hashes = shingle_hashes(pa.array(texts), unit, n, char_n, seed)
    assert offsets.dtype == np.int64 and hashes.dtype == np.uint64
    assert offsets.shape == (len(texts) + 1,) and offsets[0] == 0 and offsets[-1] == len(hashes)
    for text, got in zip(texts, doc_sets(offsets, hashes), strict=True):
        want = sorted({shingle_hash(sh, seed) for sh in ref_shingles(text, unit, n, char_n)})
        assert got.tolist() == want, text


@pytest.mark.parametrize(("unit", "n", "char_n"), CONFIGS)
def test_intersection_structure_matches_tuple_sets(unit: str, n: int, char_n: int) -> None:
    """|A ∩ B| from the hashes equals |A ∩ B| of the Python tuple sets, for every pair."""
    rng = random.Random(f"pairs-{unit}-{n}-{char_n}")
    texts = random_texts(rng, 80, vocab_size=5)
    offsets, hashes = shingle_hashes(pa.array(texts), unit, n, char_n, 99)
    got = [set(s.tolist()) for s in doc_sets(offsets, hashes)]
    want = [ref_shingles(t, unit, n, char_n) for t in texts]
    nonempty_pairs = 0
    for i in range(len(texts)):
        assert len(got[i]) == len(want[i])
        for j in range(i + 1, len(texts)):
            inter = len(want[i] & want[j])
            assert len(got[i] & got[j]) == inter
            nonempty_pairs += inter > 0
    assert nonempty_pairs > 30  # the check saw real overlaps, not only disjoint sets


def test_non_normalized_spacing_defines_words_by_runs() -> None:
    texts = ["  a  b c   d ", "a b c d"]
    o, h = shingle_hashes(pa.array(texts), "word", 2, 3, 5)
    a, b = doc_sets(o, h)
    assert a.tolist() == b.tolist()
    assert a.tolist() == sorted({shingle_hash(s, 5) for s in ref_shingles("a b c d", "word", 2, 3)})


@pytest.fixture(scope="module")
def before_a_guard_page() -> Iterator[Callable[[list[str]], pa.Array]]:
    """Texts -> a large_string array whose data buffer ends at a page that may not be read
    (Arrow pads its own buffers, so a kernel reading past them reads nothing wrong): a
    kernel that loads a byte past the buffer kills the process."""
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + page, page, 0) == 0  # PROT_NONE

    def make(texts: list[str]) -> pa.Array:
        encoded = [t.encode() for t in texts]
        data = b"".join(encoded)
        at = page - len(data)
        region[at:page] = data
        offsets = np.cumsum([0] + [len(e) for e in encoded], dtype=np.int64)
        buffer = pa.foreign_buffer(base + at, len(data), base=region)
        return pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(offsets), buffer)

    yield make
    libc.mprotect(base + page, page, 3)  # PROT_READ | PROT_WRITE, for the unmap


def test_words_of_every_length_at_every_distance_from_the_buffers_end(
    before_a_guard_page: Callable[[list[str]], pa.Array],
) -> None:
    """A word shorter than 8 bytes is found and hashed from one 8-byte load, which must not
    reach past the buffer (the last 7 bytes go byte by byte) nor past the document (a word
    running into the next one's bytes); 8 bytes and more take the byte loop."""
    rng = random.Random(8)
    for length in range(1, 18):
        word = "".join(rng.choice("abcdefghé") for _ in range(length))
        for pad in range(9):
            # The word `pad` bytes from the buffer's end; and a document whose last word is
            # followed, in the buffer, by the next document's letters.
            last = f"x y {word}" + " x" * (pad // 2) + " " * (pad % 2)
            texts = [f"{word} {word}", last]
            o, h = shingle_hashes(before_a_guard_page(texts), "word", 2, 3, 13)
            for text, got in zip(texts, doc_sets(o, h), strict=True):
                want = sorted({shingle_hash(s, 13) for s in ref_shingles(text, "word", 2, 3)})
                assert got.tolist() == want, text


def test_short_documents_fall_back_to_char_shingles() -> None:
    texts = ["ab cd ef", "日本語のテキスト", "one two three four five", "x", ""]
    # 8 code points -> 6 trigrams; 8 CJK code points -> 6; 5 words -> 1 word 5-gram;
    # 1 code point < 3 -> the whole text; empty -> none.
    o, h = shingle_hashes(pa.array(texts), "word", 5, 3, 11)
    assert np.diff(o).tolist() == [6, 6, 1, 1, 0]
    # The fallback shingles are the char shingles of unit="char" with n = char_ngram.
    oc, hc = shingle_hashes(pa.array(texts[:2] + texts[3:]), "char", 3, 0, 11)
    sets = doc_sets(o, h)
    char_sets = doc_sets(oc, hc)
    assert [s.tolist() for s in sets[:2] + sets[3:]] == [s.tolist() for s in char_sets]
    assert h[o[3]] == shingle_hash(("c", "x"), 11)


def test_repeated_shingles_are_deduplicated() -> None:
    # 5 word bigrams, all "a a"; the second text falls back to 7 char bigrams, 2 distinct.
    o, _ = shingle_hashes(pa.array(["a a a a a a", "abababab"]), "word", 2, 2, 0)
    assert np.diff(o).tolist() == [1, 2]
    o, _ = shingle_hashes(pa.array(["abababab"]), "char", 2, 0, 0)
    assert np.diff(o).tolist() == [2]


def test_long_documents_sort_as_the_reference_does() -> None:
    """Thousands of shingles a document: the bucket sort's buckets of one, of a few (sorted by
    insertion) and of many (300 distinct shingles ten times over, so a bucket that two of
    them share holds twenty) give the sorted distinct hashes, as the Python reference does."""
    rng = random.Random("long")
    vocab = [random_word(rng) for _ in range(300)]
    texts = [
        " ".join(rng.choice(vocab) for _ in range(4000)),
        "a b c " * 1500,
        " ".join(f"w{i}" for i in range(300)) * 10,
    ]
    offsets, hashes = shingle_hashes(pa.array(texts), "word", 3, 5, 17)
    for text, got in zip(texts, doc_sets(offsets, hashes), strict=True):
        want = sorted({shingle_hash(sh, 17) for sh in ref_shingles(text, "word", 3, 5)})
        assert got.tolist() == want


def test_word_order_and_boundaries_matter() -> None:
    texts = ["ab c", "a bc", "a b c", "c b a", "abc"]
    o, h = shingle_hashes(pa.array(texts), "word", 2, 9, 1)
    sets = [frozenset(s.tolist()) for s in doc_sets(o, h)]
    assert sets[0] != sets[1]
    o3, h3 = shingle_hashes(pa.array(texts[2:4]), "word", 3, 9, 1)
    assert h3[o3[0]] != h3[o3[1]]


def test_seed_changes_every_hash() -> None:
    texts = pa.array(["the quick brown fox jumps over the lazy dog"] * 2)
    _, h1 = shingle_hashes(texts[:1], "word", 3, 5, 1)
    _, h2 = shingle_hashes(texts[:1], "word", 3, 5, 2)
    assert not set(h1.tolist()) & set(h2.tolist())


def test_array_layouts_give_identical_results() -> None:
    rng = random.Random(3)
    texts: list[str | None] = list(random_texts(rng, 80))
    small = pa.array(texts, pa.string())
    large = pa.array(texts, pa.large_string())
    ref_o, ref_h = shingle_hashes(large, "word", 3, 4, 8)
    variants = [
        small,
        pa.chunked_array([small[:30], small[30:31], small[31:]]),
        pa.chunked_array([large]),
    ]
    for arr in variants:
        o, h = shingle_hashes(arr, "word", 3, 4, 8)
        assert o.tolist() == ref_o.tolist() and h.tolist() == ref_h.tolist()
    ref_sets = [s.tolist() for s in doc_sets(ref_o, ref_h)]
    th = text_hash128(large)
    for base in (small, large):
        for lo, hi in [(0, 80), (7, 40), (79, 80), (10, 10)]:
            sl = base.slice(lo, hi - lo)
            o, h = shingle_hashes(sl, "word", 3, 4, 8)
            assert [s.tolist() for s in doc_sets(o, h)] == ref_sets[lo:hi]
            assert text_hash128(sl).tolist() == th[lo:hi].tolist()


def test_nulls_are_empty_strings() -> None:
    # Build an array whose null slot still spans bytes (allowed by the Arrow format), so a
    # kernel that ignored the validity bitmap would hash them.
    values = pa.array(["alpha beta gamma", "hidden words here", "delta"], pa.string())
    with_null = pa.StringArray.from_buffers(
        3, values.buffers()[1], values.buffers()[2], pa.py_buffer(bytes([0b101])), 1
    )
    assert with_null.to_pylist() == ["alpha beta gamma", None, "delta"]
    o, _h = shingle_hashes(with_null, "word", 2, 3, 0)
    assert np.diff(o).tolist() == [2, 0, 3]
    th = text_hash128(with_null)
    assert th[1].tolist() == text_hash128(pa.array([""]))[0].tolist()
    assert text_hash128(pa.array([None, None], pa.null())).shape == (2, 2)


def test_text_hash128_matches_reference() -> None:
    rng = random.Random(5)
    texts = [*random_texts(rng, 50), "", "a", "exactly8", "exactly8!", "x" * 1000]
    got = text_hash128(pa.array(texts))
    assert got.dtype == np.int64 and got.shape == (len(texts), 2)
    want = np.array([text_hash(t) for t in texts], dtype=np.uint64).view(np.int64)
    assert got.tolist() == want.tolist()
    assert len({tuple(r) for r in got.tolist()}) == len(set(texts))
    other = text_hash128(pa.array(texts), seed=7)
    assert (
        other.tolist() == np.array([text_hash(t, 7) for t in texts], dtype=np.uint64).view(np.int64).tolist()
    )


def test_stable_values() -> None:
    """Hard-coded outputs: a change of the hash definition must be deliberate."""
    texts = pa.array(["the quick brown fox jumps over", "日本語のテキスト"])
    o, h = shingle_hashes(texts, "word", 5, 5, 42)
    assert o.tolist() == [0, 2, 6]
    assert h.tolist() == EXPECTED_WORD
    _, hc = shingle_hashes(texts[:1], "char", 4, 0, 1)
    assert hc[:3].tolist() == EXPECTED_CHAR
    assert text_hash128(pa.array(["hello world"])).tolist() == [EXPECTED_TEXT]


# Produced once by the kernels after they matched the Python reference above.
EXPECTED_WORD = [
    2442498315170000253,  # two word 5-grams
    16678933314432640793,
    6637497070884581597,  # the CJK text: four char 5-grams through the fallback
    7250967792734422315,
    11209964199780655853,
    17224128086757256498,
]
EXPECTED_CHAR = [694219712653324998, 1553424549212917434, 2476279070791459980]
EXPECTED_TEXT = [8054463784855663872, -3831464780007029597]


def test_invalid_arguments() -> None:
    arr = pa.array(["a b"])
    with pytest.raises(ValueError):
        shingle_hashes(arr, "token", 2, 2, 0)
    with pytest.raises(ValueError):
        shingle_hashes(arr, "word", 0, 2, 0)
    with pytest.raises(ValueError):
        shingle_hashes(arr, "word", 2, 0, 0)
    with pytest.raises(TypeError):
        shingle_hashes(pa.array([1, 2]), "word", 2, 2, 0)


@pytest.mark.parametrize("scratch", [1 << 20, 40])
def test_sorted_unique_equals_numpy_unique(scratch: int) -> None:
    """The sort itself, against np.unique: the extreme values, the last bucket, buckets of 16
    and 17 (insertion sort, then np.sort), repeats, and the output written over the input
    from before its start; with scratch for every segment, and with scratch too small for
    the long ones (sorted in place)."""
    rng = np.random.default_rng(3)
    top = np.uint64(2**64 - 1)
    segments = [
        np.array([], dtype=np.uint64),
        np.array([top, 0, top, 0], dtype=np.uint64),
        rng.integers(0, 2**64, size=1000, dtype=np.uint64),
        # 64 values, 6 bucket bits: 16 and 17 distinct values in the last two buckets.
        np.concatenate(
            [
                (np.uint64(62) << np.uint64(58)) + rng.integers(0, 2**58, size=16, dtype=np.uint64),
                (np.uint64(63) << np.uint64(58)) + rng.integers(0, 2**58, size=17, dtype=np.uint64),
                rng.integers(0, 2**63, size=31, dtype=np.uint64),
            ]
        ),
        np.repeat(rng.integers(0, 2**64, size=30, dtype=np.uint64), 7),
    ]
    tmp = np.empty(scratch, dtype=np.uint64)
    counts = np.empty((1 << _bucket_bits(scratch)) + 1, dtype=np.int64)
    for seg in segments:
        # The segment sits after 5 slots of the output, which it is compacted into.
        out = np.concatenate([np.full(5, 7, dtype=np.uint64), rng.permutation(seg)])
        end = _sorted_unique(out[5:], tmp, counts, out, 2)
        assert out[2:end].tolist() == np.unique(seg).tolist()
        assert out[:2].tolist() == [7, 7]
