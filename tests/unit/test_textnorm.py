"""normalize() against Python's unicodedata / str methods as the independent reference."""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from neardup.kernels.textnorm import _WS_RUN, WHITESPACE_CLASS, collapse_whitespace, normalize
from neardup_testkit import reference

# Characters on which utf8proc (Arrow) and Python's unicodedata agree for NFKC and lowercase
# (no İ, final sigma or other context-dependent mappings), covering every class the
# normalizer treats specially.
ALPHABET = (
    "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
    "éÉüÜßàÀçÇñÑøØåÅæÆœŒαβγΔΘΛπΩжЖщЩёЁ日本語中文한국어ｱｲｳＡＢＣａｂｃ１２３ﬁﬂ①²ŉ"
    "\u0301\u0308"  # combining marks: NFKC composes them with the preceding letter
    " \u00a0\u3000\t\n\r\v\f\u2028\u2029\u0085\u1680\u2003\x1c\x1f"
    ".,;:!?()[]{}\"'-_/\\@#$%^&*+=<>|~`«»「」、。・€£¥©®™°±×÷"
    "😀🎉👍🏽\u200d\ufe0f"
)


def ref_normalize(s: str | None, lowercase: bool = True, strip_punctuation: bool = False) -> str | None:
    """The reference normalization (NFKC, case, punctuation, every isspace() run), nulls kept."""
    return None if s is None else reference.normalize(s, lowercase, strip_punctuation)


def norm_list(values: Sequence[str | None], **kw: bool) -> list[str | None]:
    out = normalize(pa.array(values, pa.string()), **kw)
    assert isinstance(out, pa.Array)
    assert out.type == pa.large_string()
    return out.to_pylist()


def test_nfkc_examples() -> None:
    assert norm_list(["ＡＢＣ ｄｅｆ", "ﬁne ﬂow", "①②③", "x²", "ｶﾀｶﾅ"]) == [
        "abc def",
        "fine flow",
        "123",
        "x2",
        "カタカナ",
    ]
    assert norm_list(["ＡＢＣ ﬁ"], lowercase=False) == ["ABC fi"]
    # Decomposed é (e + combining acute) composes to the single code point.
    assert norm_list(["e\u0301"]) == ["\u00e9"]


def test_lowercase_switch() -> None:
    assert norm_list(["Hello WORLD Ünïcode ΑΒΓ"]) == ["hello world ünïcode αβγ"]
    assert norm_list(["Hello WORLD"], lowercase=False) == ["Hello WORLD"]


def test_whitespace_collapse_and_trim() -> None:
    text = "\u3000 a\u00a0\u00a0b\t\tc\n\r\nd\u2028e\u2029f\x85g\vh\fi\x1cj\u1680k \u2003 "
    assert norm_list([text]) == ["a b c d e f g h i j k"]
    assert norm_list(["   ", "\t\n", ""]) == ["", "", ""]


def test_every_python_whitespace_character_collapses() -> None:
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(spaces) > 20
    got = norm_list([f" x{c}{c}y{c}z {c}w" for c in spaces], lowercase=False)
    assert got == ["x y z w"] * len(spaces)


def test_whitespace_patterns_match_exactly_python_isspace() -> None:
    # Over every code point: the class is Python's isspace() set, and the replacement pattern
    # fires on a lone character exactly when it is whitespace other than the ASCII space.
    # Counting matches in one string of all code points ("a"-separated, so no runs form) is
    # exhaustive once every expected character is known to match on its own.
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    lone = pa.array(spaces, pa.large_string())
    assert all(pc.match_substring_regex(lone, f"^[{WHITESPACE_CLASS}]$").to_pylist())
    assert pc.match_substring_regex(lone, _WS_RUN).to_pylist() == [c != " " for c in spaces]
    every = pa.array(["a".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)])
    assert pc.count_substring_regex(every, f"[{WHITESPACE_CLASS}]")[0].as_py() == len(spaces)
    assert pc.count_substring_regex(every, _WS_RUN)[0].as_py() == len(spaces) - 1


def test_nothing_else_is_whitespace() -> None:
    # Non-space characters that look blank or are format controls must survive.
    kept = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u180e"]
    got = norm_list([f"a{c}b" for c in kept], lowercase=False)
    assert got == [ref_normalize(f"a{c}b", lowercase=False) for c in kept]
    assert all(len(g or "") >= 2 for g in got)


def test_punctuation_stripping() -> None:
    texts = [
        "Hello, World!!",
        "a+b=c; $5 © 2024",
        "「引用」、終わり。",
        "emoji 😀 here",
        "don't-stop",
    ]
    assert norm_list(texts, strip_punctuation=True) == [
        "hello world",
        "a b c 5 2024",
        "引用 終わり",
        "emoji here",
        "don t stop",
    ]
    assert norm_list(texts, strip_punctuation=False) == [
        "hello, world!!",
        "a+b=c; $5 © 2024",
        "「引用」、終わり。",
        "emoji 😀 here",
        "don't-stop",
    ]


def test_nulls_preserved() -> None:
    assert norm_list([None, "A", None, ""]) == [None, "a", None, ""]
    out = normalize(pa.array([None, None], pa.string()))
    assert out.null_count == 2 and out.type == pa.large_string()


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("strip", [True, False])
def test_random_texts_match_python_reference(lowercase: bool, strip: bool) -> None:
    rng = random.Random(1234)
    texts: list[str | None] = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(1500)
    ]
    texts[::97] = [None] * len(texts[::97])
    got = norm_list(texts, lowercase=lowercase, strip_punctuation=strip)
    want = [ref_normalize(t, lowercase, strip) for t in texts]
    assert got == want


def test_input_types_give_identical_output() -> None:
    rng = random.Random(7)
    texts: list[str | None] = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30))) for _ in range(200)
    ]
    texts[5] = None
    want = [ref_normalize(t) for t in texts]
    small = pa.array(texts, pa.string())
    large = pa.array(texts, pa.large_string())
    chunked = pa.chunked_array([small[:50], small[50:51], small[51:]])
    chunked_large = pa.chunked_array([large[:120], large[120:]])
    for arr in (small, large, chunked, chunked_large):
        out = normalize(arr)
        assert isinstance(out, pa.Array) and out.type == pa.large_string()
        assert out.to_pylist() == want
    for lo, hi in [(0, 0), (3, 17), (5, 6), (100, 200)]:
        assert normalize(small.slice(lo, hi - lo)).to_pylist() == want[lo:hi]
        assert normalize(large.slice(lo, hi - lo)).to_pylist() == want[lo:hi]


def test_empty_inputs() -> None:
    for arr in (
        pa.array([], pa.string()),
        pa.array([], pa.large_string()),
        pa.chunked_array([], pa.string()),
    ):
        out = normalize(arr)
        assert len(out) == 0 and out.type == pa.large_string()


def test_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        normalize(pa.array([1, 2, 3]))


@pytest.mark.parametrize("lowercase", [True, False])
def test_all_ascii_batches_take_a_shortcut_to_the_same_result(lowercase: bool) -> None:
    # An all-ASCII batch skips NFKC and uses ASCII lowercasing; one non-ASCII row sends the
    # whole batch down the general path, so the same rows are compared across both paths.
    rng = random.Random(11)
    alphabet = [chr(c) for c in range(128)]
    texts: list[str | None] = [None, "", "ABC  Def\tG\x1f\x0bh "]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    for part in (pa.array(texts, pa.large_string()), pa.array(texts, pa.string()).slice(2, 300)):
        fast = normalize(part, lowercase=lowercase).to_pylist()
        mixed = pa.concat_arrays([part.cast(pa.large_string()), pa.array(["\u00c9"], pa.large_string())])
        slow = normalize(mixed, lowercase=lowercase).to_pylist()[:-1]
        assert fast == slow
        assert fast == [ref_normalize(t, lowercase=lowercase) for t in part.to_pylist()]


@pytest.mark.parametrize("lowercase", [True, False])
def test_ascii_runs_eight_bytes_at_a_time(lowercase: bool) -> None:
    # The kernel copies eight ASCII bytes at once when none is a control byte and no space
    # follows whitespace: texts of words with single spaces take that path, and every
    # neighbour of it (a doubled or leading space at each offset, a tab, a byte past 0x7F,
    # the letters next to A-Z) falls back at some offset of the eight.
    rng = random.Random(21)
    words = ["a", "Zz", "AZaz@[`{", "Word", "UPPER", "x" * 11, "\x7f~", "0123456"]
    breaks = [" ", " ", " ", "  ", "\t", " \n ", "\x1c", "\u00e9", "\u00a0"]
    texts: list[str | None] = []
    for _ in range(600):
        text = "".join(rng.choice(words) + rng.choice(breaks) for _ in range(rng.randint(0, 14)))
        texts.append(text[rng.randint(0, 3) :])
    for part in (pa.array(texts, pa.large_string()), pa.array(texts, pa.string()).slice(3, 400)):
        assert normalize(part, lowercase=lowercase).to_pylist() == [
            ref_normalize(t, lowercase=lowercase) for t in part.to_pylist()
        ]
    ascii_only = [t.encode("ascii", "ignore").decode() for t in texts if t is not None]
    got = collapse_whitespace(pa.array(ascii_only, pa.large_string()), lowercase=lowercase).to_pylist()
    assert got == [" ".join(t.split()).lower() if lowercase else " ".join(t.split()) for t in ascii_only]


def test_whitespace_kernel_equals_the_regular_expression() -> None:
    # Neighbours of every whitespace encoding (same lead bytes, other continuation bytes)
    # are what a byte-level kernel could mistake for whitespace.
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    near = ["\u0084", "\u0086", "\u00a1", "\u00a9", "\u1681", "\u167f", "\u200b", "\u2010", "\u2027"]
    near += [
        "\u202a",
        "\u202e",
        "\u2030",
        "\u205e",
        "\u2060",
        "\u3001",
        "\u2fff",
        "x",
        "ab",
        "é",
        "\U0001f600",
    ]
    rng = random.Random(5)
    texts: list[str | None] = [None, "", " ", "\u3000", "a\u2028", "\u00a0b"]
    for _ in range(3000):
        texts.append(
            "".join(rng.choice(spaces if rng.random() < 0.4 else near) for _ in range(rng.randint(0, 12)))
        )
    arr = pa.array(texts, pa.large_string())
    for part in (arr, arr.slice(3, 2000)):
        want = pc.utf8_trim(
            pc.replace_substring_regex(part, pattern=_WS_RUN, replacement=" "), characters=" "
        )
        got = collapse_whitespace(part)
        assert got.to_pylist() == want.to_pylist()
        assert got.null_count == part.null_count


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("strip", [True, False])
@pytest.mark.parametrize("ascii_only", [True, False])
def test_slices_whose_text_starts_inside_the_buffer(lowercase: bool, strip: bool, ascii_only: bool) -> None:
    # A slice (a batch cut from a larger one) keeps the parent's buffers: its first row's text
    # starts deep inside the data buffer. pc.ascii_lower once returned other rows' text here.
    rng = random.Random(13)
    alphabet = [chr(c) for c in range(32, 127)] + ["\t", "\n"] if ascii_only else list(ALPHABET)
    texts: list[str | None] = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(400)
    ]
    with_null = [*texts[:50], None, *texts[51:]]  # a null changes how Arrow casts a slice
    for type_, rows in itertools.product((pa.string(), pa.large_string()), (texts, with_null)):
        arr = pa.array(rows, type_)
        for lo, hi in [(1, 400), (7, 8), (49, 52), (123, 321), (399, 400)]:
            got = normalize(arr.slice(lo, hi - lo), lowercase=lowercase, strip_punctuation=strip)
            got.validate(full=True)
            want = [ref_normalize(t, lowercase, strip) for t in rows[lo:hi]]
            assert got.to_pylist() == want, (type_, lo, hi)
