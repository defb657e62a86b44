"""Text normalization over Arrow arrays: pyarrow.compute kernels and one numba kernel,
no Python loop per row.

The steps, in this order:

1. NFKC (``pc.utf8_normalize``): full-width letters, ligatures ("ﬁ" -> "fi"), compatibility
   digits and most exotic spaces (NBSP, U+3000 ...) fold to their plain forms.
2. Optional lowercase (``pc.utf8_lower``, utf8proc full case mapping).
3. Optional replacement of every Unicode punctuation or symbol code point (``\\p{P}``,
   ``\\p{S}``; emoji are ``So`` so they go too) by a space.
4. Every run of whitespace collapsed to one ASCII space, then leading/trailing spaces trimmed.
   "Whitespace" is exactly the set for which Python's ``str.isspace()`` is true: RE2's
   ``\\s`` is ASCII-only and omits ``\\v``, so the class is spelled out (``\\p{Z}`` adds the
   Unicode space, line and paragraph separators; U+001C..U+001F and U+0085 complete it).

Step 4 alone (the default, without step 3) runs in a numba kernel over the UTF-8 buffer:
eight ASCII bytes at a time where none is a control byte and no space follows whitespace
(most of a text), else a byte at a time, branch-free on ASCII: 1.6 us per 2 KB document
(2.8 a byte at a time, 6.3 for the regular expression). With step 3, one regular expression
does both steps. An all-ASCII batch skips step 1 (NFKC leaves ASCII as it is) and, without
step 3, is lowercased inside the same kernel.

The output is ``large_string`` whatever the input (``string``, ``large_string``, sliced,
chunked), so a batch can never overflow 32-bit offsets downstream. Nulls stay null.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from neardup.kernels.arrow import text_buffers
from neardup.kernels.jit import njit
from neardup.kernels.words8 import HIGH_BITS, SPACES, load8, store8, zero_bytes

__all__ = ["WHITESPACE_CLASS", "collapse_whitespace", "normalize"]

# Kept equal to Python's str.isspace() set (checked over every code point in the tests) so a
# pure-Python reference of the shingler can split normalized text the same way.
_CONTROL_SPACES = r"\t\n\v\f\r\x{1C}-\x{1F}\x{85}"
WHITESPACE_CLASS = _CONTROL_SPACES + r"\p{Z}"
# Only runs that are not already one ASCII space are matched: a single space between words
# is left alone, which makes the replacement ~15x faster on ordinary text (RE2 pays per
# match). `[^\P{Z} ]` is "\p{Z} except U+0020" (RE2 has no class subtraction).
_OTHER_SPACE = f"[{_CONTROL_SPACES}]|[^\\P{{Z}} ]"
_WS_RUN = f"[{WHITESPACE_CLASS}]{{2,}}|{_OTHER_SPACE}"
# One pass for punctuation and whitespace: replacing punctuation by a space and then
# collapsing is the same as treating punctuation as whitespace.
_PUNCT = r"\p{P}\p{S}"
_PUNCT_OR_WS_RUN = f"[{_PUNCT}{WHITESPACE_CLASS}]{{2,}}|[{_PUNCT}]|{_OTHER_SPACE}"


def _as_large_string_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        # Casting before combining: a chunked `string` column can hold more than 2 GiB in total,
        # which a single int32-offset array cannot.
        texts = texts.cast(pa.large_string())
        return texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not isinstance(texts, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(texts).__name__}")
    if pa.types.is_large_string(texts.type):
        return texts
    if pa.types.is_string(texts.type) or pa.types.is_null(texts.type) or str(texts.type) == "string_view":
        return texts.cast(pa.large_string())
    raise TypeError(f"expected a string array, got {texts.type}")


def _all_ascii(arr: pa.Array) -> bool:
    """True when every byte of the array's text (null slots included) is ASCII."""
    offsets_buf, data_buf = arr.buffers()[1:3]
    if data_buf is None or offsets_buf is None:
        return True
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)
    lo, hi = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    data = np.frombuffer(data_buf, dtype=np.uint8)[lo:hi]
    return data.size == 0 or int(data.max()) < 0x80


def normalize(
    texts: pa.Array | pa.ChunkedArray,
    lowercase: bool = True,
    strip_punctuation: bool = False,
) -> pa.Array:
    """NFKC, optional lowercase, optional punctuation/symbol removal, whitespace collapse, trim.

    Returns a ``large_string`` array of the same length; nulls stay null.
    """
    arr = _as_large_string_array(texts)
    if len(arr) == 0:
        return pa.array([], type=pa.large_string())
    if _all_ascii(arr):
        # NFKC leaves ASCII as it is and ASCII lowercasing is all utf8_lower would do.
        if not strip_punctuation:
            # Lowercased in the whitespace kernel's pass over the bytes (a table lookup).
            return collapse_whitespace(arr, lowercase=lowercase)
        # Not pc.ascii_lower: on large_string offsets that do not start at 0 (a cast slice)
        # it returns an invalid array whose rows read other rows' text (pyarrow 26).
        out = pc.utf8_lower(arr) if lowercase else arr
    else:
        out = pc.utf8_normalize(arr, "NFKC")
        if lowercase:
            out = pc.utf8_lower(out)
    if isinstance(out, pa.ChunkedArray):  # defensive: compute kernels keep Array in, Array out
        out = out.combine_chunks()
    if not strip_punctuation:
        return collapse_whitespace(out)
    out = pc.replace_substring_regex(out, pattern=_PUNCT_OR_WS_RUN, replacement=" ")
    out = pc.utf8_trim(out, characters=" ")
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    return out


def warm() -> None:
    """Load the whitespace kernel's compiled code (the command line calls this while the
    JVM starts, `session.preloaded`)."""
    collapse_whitespace(pa.array(["A  b"], pa.large_string()), lowercase=True)


# 1 for the ASCII bytes in Python's isspace() set: \t \n \v \f \r, U+001C..U+001F, space.
_ASCII_SPACE = np.zeros(128, dtype=np.uint8)
_ASCII_SPACE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20]] = 1
# What the kernel writes for each ASCII byte: whitespace becomes a space, and with
# lowercasing A-Z become a-z (all that lowercasing does to ASCII).
_ASCII_AS_IS = np.where(_ASCII_SPACE == 1, 0x20, np.arange(128)).astype(np.uint8)
_ASCII_LOWER = _ASCII_AS_IS.copy()
_ASCII_LOWER[ord("A") : ord("Z") + 1] += 0x20


def collapse_whitespace(texts: pa.Array, lowercase: bool = False) -> pa.Array:
    """Every run of whitespace (Python's ``str.isspace()`` set) -> one ASCII space, trimmed;
    with `lowercase`, ASCII letters lowercased in the same pass (other bytes are left as
    they are: for ASCII text that is ``utf8_lower``).

    ``large_string`` out; nulls stay null. The same as replacing ``_WS_RUN`` by a space and
    trimming spaces (tested over every whitespace code point and its byte neighbours).
    """
    arr = _as_large_string_array(texts)
    starts, ends, data = text_buffers(arr)
    table = _ASCII_LOWER if lowercase else _ASCII_AS_IS
    offsets, out = _collapse_kernel(starts, ends, data, _ASCII_SPACE, table)
    validity = None
    if arr.null_count:
        validity = pa.array(arr.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]
    return pa.LargeStringArray.from_buffers(
        len(arr), pa.py_buffer(offsets), pa.py_buffer(out), validity, arr.null_count
    )


@njit(cache=True, nogil=True)
def _wide_space_len(data: npt.NDArray[np.uint8], i: int, end: int) -> int:
    """Bytes of the non-ASCII whitespace character at data[i] (U+0085, U+00A0, U+1680,
    U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), or 0."""
    b = data[i]
    if b == 0xC2 and i + 1 < end:
        c = data[i + 1]
        return 2 if c == 0x85 or c == 0xA0 else 0
    if i + 2 >= end:
        return 0
    c = data[i + 1]
    d = data[i + 2]
    if b == 0xE1:
        return 3 if c == 0x9A and d == 0x80 else 0
    if b == 0xE2:
        if c == 0x80:
            return 3 if d <= 0x8A or d == 0xA8 or d == 0xA9 or d == 0xAF else 0
        return 3 if c == 0x81 and d == 0x9F else 0
    if b == 0xE3:
        return 3 if c == 0x80 and d == 0x80 else 0
    return 0


_U0 = np.uint64(0)
_S2 = np.uint64(2)
_S8 = np.uint64(8)
_S63 = np.uint64(63)
_FIRST_HIGH = np.uint64(0x80)
_ADD_60 = np.uint64(0x6060606060606060)
_ADD_3F = np.uint64(0x3F3F3F3F3F3F3F3F)
_ADD_25 = np.uint64(0x2525252525252525)


@njit(cache=True, nogil=True, inline="always")
def _below_space(x: np.uint64) -> np.uint64:
    """For eight ASCII bytes: the high bit of those below 0x20 (control bytes, among them
    every ASCII whitespace but the space). No byte carries into the next: each stays
    below 0x100."""
    return ~(x + _ADD_60) & HIGH_BITS


@njit(cache=True, nogil=True, inline="always")
def _upper_bytes(x: np.uint64) -> np.uint64:
    """For eight ASCII bytes: the high bit of those in A-Z (at or above 0x41, below 0x5B)."""
    return (x + _ADD_3F) & ~(x + _ADD_25) & HIGH_BITS


@njit(cache=True, nogil=True)
def _collapse_kernel(
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    ascii_space: npt.NDArray[np.uint8],
    ascii_out: npt.NDArray[np.uint8],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    n = starts.shape[0]
    total = 0
    for r in range(n):
        total += ends[r] - starts[r]
    out = np.empty(total + 1, dtype=np.uint8)  # +1: a whitespace byte is stored before it is counted
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    w = 0
    lower = ascii_out[0x41] == 0x61
    for r in range(n):
        i = starts[r]
        end = ends[r]
        row = w
        prev = np.int64(1)  # "after whitespace": leading whitespace is dropped
        while i < end:
            if i + 8 <= end:
                # Eight ASCII bytes with no control byte and no space after whitespace are
                # written as they are (lowercased, with `lower`): most of most texts, with
                # no branch a byte.
                x = load8(data, i)
                spaces = zero_bytes(x ^ SPACES)
                # A space after a space, or first after whitespace (`prev`).
                doubled = spaces & ((spaces >> _S8) | (_FIRST_HIGH & (_U0 - np.uint64(prev))))
                if ((x & HIGH_BITS) | _below_space(x) | doubled) == _U0:
                    if lower:
                        x |= _upper_bytes(x) >> _S2
                    store8(out, w, x)
                    w += 8
                    prev = np.int64(spaces >> _S63)
                    i += 8
                    continue
            b = data[i]
            if b < 0x80:
                # Branch-free on ASCII: a whitespace byte is written as a space and counted
                # only when it starts a run; a branch per word boundary cost twice as much.
                ws = np.int64(ascii_space[b])
                out[w] = ascii_out[b]
                w += int(1 - (ws & prev))
                prev = ws
                i += 1
            else:
                k = _wide_space_len(data, i, end)
                if k:
                    out[w] = 0x20
                    w += int(1 - prev)
                    prev = np.int64(1)
                    i += k
                else:
                    out[w] = b
                    w += 1
                    prev = np.int64(0)
                    i += 1
        if prev == 1 and w > row:
            w -= 1  # the space that a trailing run of whitespace left
        offsets[r + 1] = w
    return offsets, out[:w]
