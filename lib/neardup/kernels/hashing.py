"""Stable seeded 64-bit hashing, shingling and 128-bit text hashes over Arrow string buffers.

Everything here is a numba kernel reading the Arrow ``offsets`` + ``data`` buffers directly
(``string`` with int32 offsets and ``large_string`` with int64 offsets alike, sliced or not,
chunked arrays combined first). A null is hashed and shingled as the empty string.

Definitions (all arithmetic on unsigned 64-bit integers, wrapping mod 2^64; they are part of
the output format: a change here changes every signature, and the unit tests pin them with a
pure-Python re-implementation and hard-coded values):

``splitmix64(seed)``
    The standard SplitMix64 stream: ``state += 0x9E3779B97F4A7C15``;
    ``z = (state ^ state>>30) * 0xBF58476D1CE4E5B9``; ``z = (z ^ z>>27) * 0x94D049BB133111EB``;
    output ``z ^ z>>31``. Every constant that depends on the user's seed comes from such a
    stream, started at ``seed ^ TAG`` where TAG is an 8-byte ASCII domain tag read as a
    little-endian integer, so the purposes below get unrelated keys from one seed.

``fmix64(z)``
    MurmurHash3's finalizer: ``z ^= z>>33; z *= 0xFF51AFD7ED558CCD; z ^= z>>33;
    z *= 0xC4CEB9FE1A85EC53; z ^= z>>33``.

``hash_bytes(bytes, k0, k1, k2)``  (k1, k2 odd)
    A single-lane MurmurHash3-style hash with seed-derived multipliers:
    ``h = k0``; for each full 8-byte block ``w`` (little-endian):
    ``w = rotl(w * k1, 31) * k2; h = rotl(h ^ w, 27) * 5 + 0x52DCE729``; the 1..7 tail bytes
    (little-endian, zero-padded) as ``w``: ``h ^= rotl(w * k1, 31) * k2``; result
    ``fmix64(h ^ len)`` (the length last, so words can be hashed while being scanned).
    Multipliers derived from the seed (not only the initial state) make the hashes for
    different seeds structurally different functions.

Shingles (texts are already normalized: words separated by single spaces, trimmed):

- words are the maximal runs of bytes other than the ASCII space 0x20 (for normalized text
  this is ``text.split(" ")``);
- ``unit="word"``: shingle j is words j..j+n-1, for j in 0..W-n. A text with fewer than n
  words (W < n) is shingled as character n-grams of size ``char_ngram`` instead;
- ``unit="char"``: character n-grams of size n. Characters are Unicode code points (a new
  one starts at every byte b with ``b & 0xC0 != 0x80``); the space is a character. A
  non-empty text with fewer than n code points has one shingle, the whole text; an empty
  text has none;
- word shingle hash: ``w_t = hash_bytes(word_t, W0, W1, W2)`` for each word;
  ``h = C0; for t in 0..n-1: h = (rotl(h, 29) ^ w_t) * C1``; shingle hash ``fmix64(h)``.
  Keys ``W0, W1|1, W2|1, C0, C1|1`` are the first five outputs of ``splitmix64(seed ^
  TAG_WORD)``. Order matters (the steps do not commute) and so do word boundaries (words
  are hashed separately, so "ab c" and "a bc" differ);
- char shingle hash: ``hash_bytes(utf8 bytes of the n-gram, K0, K1|1, K2|1)`` with keys from
  ``splitmix64(seed ^ TAG_CHAR)``; the fallback of short texts in word mode uses the same
  function, so a short text gets the shingles of ``unit="char", ngram=char_ngram``.

``text_hash128``: ``(hash_bytes(text, A0, A1|1, A2|1), hash_bytes(text, B0, B1|1, B2|1))``
with A0..B2 the first six outputs of ``splitmix64(seed ^ TAG_TEXT)``, viewed as int64; the
default seed is ``DEFAULT_TEXT_SEED`` (the ASCII bytes "neardup1" read big-endian).

Tags: TAG_WORD = b"nd:words", TAG_CHAR = b"nd:chars", TAG_TEXT = b"nd:text2" (little-endian).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from neardup.kernels.arrow import text_buffers
from neardup.kernels.choices import UNITS
from neardup.kernels.jit import njit
from neardup.kernels.words8 import FIRST_BYTES, HIGH_BITS, SPACES, load8, lowest_byte, zero_bytes

__all__ = [
    "DEFAULT_TEXT_SEED",
    "TAG_CHAR",
    "TAG_TEXT",
    "TAG_WORD",
    "UNITS",
    "check_shingle_args",
    "doc_shingles",
    "fmix64",
    "hash_bytes",
    "rotl",
    "shingle_hashes",
    "shingle_keys",
    "splitmix64",
    "text_hash128",
]

U64Array = npt.NDArray[np.uint64]
I64Array = npt.NDArray[np.int64]
U8Array = npt.NDArray[np.uint8]

MASK64 = (1 << 64) - 1


def _tag(name: bytes) -> int:
    assert len(name) == 8
    return int.from_bytes(name, "little")


TAG_WORD = _tag(b"nd:words")
TAG_CHAR = _tag(b"nd:chars")
TAG_TEXT = _tag(b"nd:text2")
DEFAULT_TEXT_SEED = 0x6E65617264757031  # "neardup1": exact-duplicate hashes need no user seed

# numba types `uint64 op int-literal` as int64 (or float64), silently changing the arithmetic:
# every constant used in a kernel is a np.uint64 global, frozen into the compiled code.
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U5 = np.uint64(5)
_U8 = np.uint64(8)
_S27 = np.uint64(27)
_S29 = np.uint64(29)
_S31 = np.uint64(31)
_S33 = np.uint64(33)
_S64 = np.uint64(64)
_P1, _P8 = np.uintp(1), np.uintp(8)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_MURMUR_ADD = np.uint64(0x52DCE729)
_SPACE = np.uint8(0x20)
_CONT_MASK = np.uint8(0xC0)
_CONT_BITS = np.uint8(0x80)


# --------------------------------------------------------------------------------------------
# Seed derivation (Python ints: runs once per call, never per row)


def splitmix64(seed: int, count: int) -> U64Array:
    """The first ``count`` outputs of the SplitMix64 stream started at ``seed`` (mod 2^64)."""
    state = seed & MASK64
    out = np.empty(count, dtype=np.uint64)
    for i in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out[i] = z ^ (z >> 31)
    return out


def _hash_keys(stream: U64Array) -> U64Array:
    """(k0, k1|1, k2|1) for hash_bytes from three stream outputs."""
    return np.array([stream[0], stream[1] | _U1, stream[2] | _U1], dtype=np.uint64)


@lru_cache(maxsize=64)
def shingle_keys(seed: int) -> U64Array:
    """Keys of the shingle hash: [W0, W1, W2, C0, C1, K0, K1, K2] (see module docstring)."""
    w = splitmix64(seed ^ TAG_WORD, 5)
    c = splitmix64(seed ^ TAG_CHAR, 3)
    keys = np.concatenate([_hash_keys(w[:3]), np.array([w[3], w[4] | _U1], dtype=np.uint64), _hash_keys(c)])
    keys.flags.writeable = False
    return keys


# --------------------------------------------------------------------------------------------
# Kernel building blocks


@njit(cache=True, nogil=True, inline="always")
def rotl(x: np.uint64, r: np.uint64) -> np.uint64:
    return (x << r) | (x >> (_S64 - r))


@njit(cache=True, nogil=True)
def fmix64(z: np.uint64) -> np.uint64:
    """MurmurHash3 64-bit finalizer (a bijection with full avalanche)."""
    z ^= z >> _S33
    z *= _FMIX1
    z ^= z >> _S33
    z *= _FMIX2
    z ^= z >> _S33
    return z


@njit(cache=True, nogil=True)
def hash_bytes(data: U8Array, start: int, end: int, k0: np.uint64, k1: np.uint64, k2: np.uint64) -> np.uint64:
    """Seeded 64-bit hash of data[start:end] (definition in the module docstring)."""
    h = k0
    # Unsigned indices: numba adds negative-index wraparound code to every signed index,
    # which also stops LLVM from merging the eight byte loads into one.
    i = np.uintp(start)
    stop = np.uintp(end)
    while i + _P8 <= stop:
        w = rotl(load8(data, i) * k1, _S31) * k2
        h = rotl(h ^ w, _S27) * _U5 + _MURMUR_ADD
        i += _P8
    if i < stop:
        w = _U0
        shift = _U0
        while i < stop:
            w |= np.uint64(data[i]) << shift
            shift += _U8
            i += _P1
        h ^= rotl(w * k1, _S31) * k2
    return fmix64(h ^ np.uint64(end - start))


# Scanning loops index with np.uintp(...): a signed index gets numba's negative-index
# wraparound code on every byte.


@njit(cache=True, nogil=True)
def _count_chars(data: U8Array, start: int, end: int) -> int:
    c = 0
    for i in range(start, end):
        if i == start or (data[np.uintp(i)] & _CONT_MASK) != _CONT_BITS:
            c += 1
    return c


@njit(cache=True, nogil=True)
def _count_words(data: U8Array, start: int, end: int) -> int:
    c = 0
    prev_space = True
    for i in range(start, end):
        is_space = data[np.uintp(i)] == _SPACE
        if prev_space and not is_space:
            c += 1
        prev_space = is_space
    return c


@njit(cache=True, nogil=True)
def _doc_shingle_count(data: U8Array, start: int, end: int, word_mode: bool, n: int, char_n: int) -> int:
    """Number of shingle positions (duplicates included) of data[start:end]."""
    m = n
    if word_mode:
        w = _count_words(data, start, end)
        if w >= n:
            return w - n + 1
        m = char_n
    c = _count_chars(data, start, end)
    if c == 0:
        return 0
    if c < m:
        return 1
    return c - m + 1


@njit(cache=True, nogil=True)
def _next_char(data: U8Array, p: int, end: int) -> int:
    p += 1
    while p < end and (data[np.uintp(p)] & _CONT_MASK) == _CONT_BITS:
        p += 1
    return p


@njit(cache=True, nogil=True, inline="always")
def _short_word(data: U8Array, i: int, end: int, limit: int) -> int:
    """The end of the word at data[i] (not a space) if it is shorter than 8 bytes and 8
    bytes from i lie within the buffer (`limit`), else i: its end is the first byte from i
    that is a space or at `end`, found in one 8-byte load."""
    if i + 8 > limit:
        return i
    stop = zero_bytes(load8(data, i) ^ SPACES) | (HIGH_BITS & ~FIRST_BYTES[min(end - i, 8)])
    if stop == _U0:
        return i
    return i + lowest_byte(stop)


@njit(cache=True, nogil=True)
def doc_shingles(
    data: U8Array,
    start: int,
    end: int,
    word_mode: bool,
    n: int,
    char_n: int,
    keys: U64Array,
    ring: U64Array,
    out: U64Array,
    pos: int,
) -> int:
    """Write the shingle hashes of data[start:end] (in text order, duplicates kept) to
    out[pos:]; return how many. ``ring`` is scratch of at least 2n slots; ``out`` must have
    room for _doc_shingle_count(...) values."""
    emitted = 0
    m = n
    if word_mode:
        w0 = keys[0]
        w1 = keys[1]
        w2 = keys[2]
        c0 = keys[3]
        c1 = keys[4]
        words = 0
        head = 0  # ring slot of the next word: of the oldest of the window, once it is full
        limit = data.shape[0]
        i = start
        while i < end:
            while i < end and data[np.uintp(i)] == _SPACE:
                i += 1
            if i >= end:
                break
            # Most words are shorter than 8 bytes: one load finds the end and hashes them,
            # with no branch per byte (`_short_word`); longer ones (and the last 7 bytes of
            # the buffer) are scanned byte by byte.
            j = _short_word(data, i, end, limit)
            if j > i:
                w = load8(data, i) & FIRST_BYTES[j - i]
                h = w0 ^ (rotl(w * w1, _S31) * w2)
            else:
                # hash_bytes(data, i, j, w0, w1, w2) computed while scanning for the word's end.
                j = i
                h = w0
                w = _U0
                shift = _U0
                while j < end:
                    byte = data[np.uintp(j)]
                    if byte == _SPACE:
                        break
                    w |= np.uint64(byte) << shift
                    shift += _U8
                    j += 1
                    if shift == _S64:
                        h = rotl(h ^ (rotl(w * w1, _S31) * w2), _S27) * _U5 + _MURMUR_ADD
                        w = _U0
                        shift = _U0
                if shift != _U0:
                    h ^= rotl(w * w1, _S31) * w2
            # Each word's hash in two slots, head and head + n: once head moves on, the window
            # of the last n words is ring[head : head + n], one loop of n in order. Wrap by
            # compare, not `% n`: a 64-bit division per word costs more than its hash.
            hw = fmix64(h ^ np.uint64(j - i))
            ring[head] = hw
            ring[head + n] = hw
            head += 1
            if head == n:
                head = 0
            words += 1
            if words >= n:
                h = c0
                for t in range(head, head + n):
                    h = (rotl(h, _S29) ^ ring[t]) * c1
                out[pos + emitted] = fmix64(h)
                emitted += 1
            i = j
        if words >= n:
            return emitted
        m = char_n
    if end <= start:
        return 0
    k0 = keys[5]
    k1 = keys[6]
    k2 = keys[7]
    lo = start
    hi = start
    c = 0
    while hi < end and c < m:
        hi = _next_char(data, hi, end)
        c += 1
    # With fewer than m code points, [lo, hi) is the whole text: its single shingle.
    out[pos] = hash_bytes(data, lo, hi, k0, k1, k2)
    emitted = 1
    while hi < end:
        lo = _next_char(data, lo, end)
        hi = _next_char(data, hi, end)
        out[pos + emitted] = hash_bytes(data, lo, hi, k0, k1, k2)
        emitted += 1
    return emitted


# --------------------------------------------------------------------------------------------
# Batch kernels


@njit(cache=True, nogil=True)
def _text_hash128_kernel(starts: I64Array, ends: I64Array, data: U8Array, keys: U64Array) -> U64Array:
    out = np.empty((starts.shape[0], 2), dtype=np.uint64)
    for d in range(starts.shape[0]):
        out[d, 0] = hash_bytes(data, starts[d], ends[d], keys[0], keys[1], keys[2])
        out[d, 1] = hash_bytes(data, starts[d], ends[d], keys[3], keys[4], keys[5])
    return out


# A document's shingle hashes are sorted by their top bits into at least as many buckets as
# there are hashes, then each bucket on its own: the hashes are keyed and uniform, so a bucket
# holds about one and the sort is linear. It took a third of np.sort's time on the benchmark
# corpus (500 shingles a document: 6 us against 15). A bucket of more than _SMALL_BUCKET (the
# repeats of a repetitive text's few shingles) is sorted by np.sort, so no input is quadratic.
# A document of more than 2**_MAX_BUCKET_BITS shingles (a megabyte of text or more) is sorted
# in place by np.sort: the bucket sort's scratch (8 bytes a hash) stays within 8 MB, and the
# counters within 8 MB, however long the document.
_MAX_BUCKET_BITS = 20
_SMALL_BUCKET = 16


@njit(cache=True, nogil=True)
def _bucket_bits(c: int) -> int:
    """The bits of a bucket index for c hashes: 2**bits >= c, at most _MAX_BUCKET_BITS."""
    bits = 1
    while (1 << bits) < c and bits < _MAX_BUCKET_BITS:
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def _sorted_unique(seg: U64Array, tmp: U64Array, counts: I64Array, out: U64Array, write: int) -> int:
    """Write seg's distinct values in ascending order to out[write:]; return the new end.
    out may be the array seg views, from at or before seg's start (each value is read
    before anything is written over it). tmp: scratch of at most 2**_MAX_BUCKET_BITS values;
    a longer seg is sorted in place. counts: scratch of 2**_bucket_bits(len(tmp)) + 1."""
    c = seg.shape[0]
    if c == 0:
        return write
    if c > tmp.shape[0]:
        seg.sort()
        src = seg
    else:
        src = tmp[:c]
        bits = _bucket_bits(c)
        shift = np.uint64(64 - bits)
        nb = 1 << bits
        counts[: nb + 1] = 0
        for t in range(c):
            counts[np.intp(seg[t] >> shift) + 1] += 1
        for b in range(1, nb + 1):
            counts[b] += counts[b - 1]
        # counts[b] is bucket b's next free slot: its start, then its end once filled.
        for t in range(c):
            v = seg[t]
            k = np.intp(v >> shift)
            tmp[counts[k]] = v
            counts[k] += 1
        lo = 0
        for b in range(nb):
            hi = counts[b]
            if hi - lo > _SMALL_BUCKET:
                tmp[lo:hi].sort()
            elif hi - lo > 1:
                for t in range(lo + 1, hi):
                    v = tmp[t]
                    u = t
                    while u > lo and tmp[u - 1] > v:
                        tmp[u] = tmp[u - 1]
                        u -= 1
                    tmp[u] = v
            lo = hi
    prev = _U0
    for t in range(c):
        v = src[t]
        if t == 0 or v != prev:
            out[write] = v
            write += 1
        prev = v
    return write


@njit(cache=True, nogil=True)
def _shingle_hashes_kernel(
    starts: I64Array,
    ends: I64Array,
    data: U8Array,
    word_mode: bool,
    n: int,
    char_n: int,
    keys: U64Array,
) -> tuple[I64Array, U64Array]:
    ndocs = starts.shape[0]
    # Exact sizing pass: an upper bound from byte lengths would reserve 8x the text size.
    total = 0
    longest = 0
    for d in range(ndocs):
        c = _doc_shingle_count(data, starts[d], ends[d], word_mode, n, char_n)
        total += c
        longest = max(longest, c)
    out = np.empty(total, dtype=np.uint64)
    offsets = np.empty(ndocs + 1, dtype=np.int64)
    offsets[0] = 0
    ring = np.empty(2 * max(n, 1), dtype=np.uint64)
    tmp = np.empty(min(longest, 1 << _MAX_BUCKET_BITS), dtype=np.uint64)
    counts = np.empty((1 << _bucket_bits(tmp.shape[0])) + 1, dtype=np.int64)
    read = 0
    write = 0
    for d in range(ndocs):
        c = doc_shingles(data, starts[d], ends[d], word_mode, n, char_n, keys, ring, out, read)
        # Unique values compact leftwards (write <= read): nothing unread is overwritten.
        write = _sorted_unique(out[read : read + c], tmp, counts, out, write)
        read += c
        offsets[d + 1] = write
    return offsets, out[:write]


# --------------------------------------------------------------------------------------------
# Arrow plumbing


def check_shingle_args(unit: str, ngram: int, char_ngram: int) -> bool:
    """Validate the shingling arguments; True for word mode (which may fall back to chars)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if int(ngram) < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")
    if unit == "word" and int(char_ngram) < 1:
        raise ValueError(f"char_ngram must be >= 1, got {char_ngram}")
    return unit == "word"


# --------------------------------------------------------------------------------------------
# Public API


@lru_cache(maxsize=16)
def _text_keys(seed: int) -> U64Array:
    s = splitmix64(seed ^ TAG_TEXT, 6)
    keys = np.concatenate([_hash_keys(s[:3]), _hash_keys(s[3:])])
    keys.flags.writeable = False
    return keys


def text_hash128(texts: pa.Array | pa.ChunkedArray, seed: int = DEFAULT_TEXT_SEED) -> np.ndarray:
    """(n, 2) int64: two independently keyed 64-bit hashes of each row's UTF-8 bytes."""
    starts, ends, data = text_buffers(texts)
    out = _text_hash128_kernel(starts, ends, data, _text_keys(seed & MASK64))
    return out.view(np.int64)


def shingle_hashes(
    texts: pa.Array | pa.ChunkedArray, unit: str, ngram: int, char_ngram: int, seed: int
) -> tuple[I64Array, U64Array]:
    """(offsets int64 of length n+1, hashes uint64): ``hashes[offsets[i]:offsets[i+1]]`` are
    the sorted unique shingle hashes of row i. Texts must already be normalized."""
    word_mode = check_shingle_args(unit, ngram, char_ngram)
    starts, ends, data = text_buffers(texts)
    return _shingle_hashes_kernel(
        starts, ends, data, word_mode, int(ngram), int(char_ngram), shingle_keys(seed & MASK64)
    )
