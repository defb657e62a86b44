"""MinHash signatures (classic and one-permutation) and LSH band keys, as numba kernels.

Signatures are ``(n, num_perm)`` uint32. Both methods read the shingle hashes defined in
:mod:`neardup.kernels.hashing`; :func:`signatures` shingles the Arrow text buffers itself
(one reused per-document scratch buffer, nothing materialized for the batch): a signature
is a function of the document's set of shingle hashes (duplicates cannot change a minimum),
which the tests check against a Python reference over ``shingle_hashes``.

classic
    ``permutations(num_perm, seed)``: the SplitMix64 stream of ``seed`` (see hashing) read in
    pairs, ``a_i = 1 + s[2i] mod (p - 1)``, ``b_i = s[2i+1] mod p``, p = 2^61 - 1. For a
    shingle hash x, ``x' = x mod p`` and ``h_i(x) = (a_i x' + b_i) mod p`` computed exactly:
    the 122-bit product is split into 32-bit halves and folded with ``2^61 = 1 (mod p)``, so
    nothing wraps in uint64 (the widespread ``a * x`` in uint64 breaks universality). Slot i
    is the minimum of ``h_i`` over the document's shingles (on the full 61-bit values),
    stored as its low 32 bits.

oph
    One-permutation hashing with optimal densification (Shrivastava, ICML 2017). Per shingle
    one mix ``m = fmix64(x ^ M)``; bin ``((m >> 32) * k) >> 32`` (multiply-shift range
    reduction), value ``m & 0xFFFFFFFF``, minimum kept per bin. An empty bin i then copies
    the value of the first originally non-empty bin j in the sequence
    ``j_t = ((g >> 32) * k) >> 32`` with ``g = fmix64(D ^ (i << 32 | t))``, t = 0, 1, 2, ...
    M and D are the first two outputs of ``splitmix64(seed ^ TAG_OPH)``. O(L + k) per document.

Empty documents (no shingles: empty text) get every slot = ``EMPTY_SLOT`` (0xFFFFFFFF).
A real document has all slots equal to it with probability about 2^-(32 k); callers must
exclude empty documents from banding and verification (two would otherwise look identical).

Band keys: for band j (slots ``[j*rows, (j+1)*rows)``),
``h = fmix64(B0 + j * 0x9E3779B97F4A7C15)``; for each slot value v in order
``h = (rotl(h, 29) ^ v) * (B1 | 1)``; key ``fmix64(h)`` viewed as int64, with B0, B1 from
``splitmix64(seed ^ TAG_BAND)``. Mixing the band index in keeps equal slot values in different
bands from sharing a bucket.

The fused kernels here call kernels of neardup.kernels.hashing; numba's on-disk cache does
not notice edits there, so its directory is keyed to every kernel source (numba_cache.py).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from neardup.kernels.arrow import text_buffers
from neardup.kernels.choices import METHODS
from neardup.kernels.hashing import (
    MASK64,
    check_shingle_args,
    doc_shingles,
    fmix64,
    rotl,
    shingle_keys,
    splitmix64,
)
from neardup.kernels.jit import njit

__all__ = [
    "EMPTY_SLOT",
    "MERSENNE_61",
    "METHODS",
    "TAG_BAND",
    "TAG_OPH",
    "band_keys",
    "estimate_jaccard",
    "permutations",
    "signatures",
]

U64Array = npt.NDArray[np.uint64]
U32Array = npt.NDArray[np.uint32]
I64Array = npt.NDArray[np.int64]

MERSENNE_61 = (1 << 61) - 1
EMPTY_SLOT = 0xFFFFFFFF
MAX_NUM_PERM = 1 << 16

TAG_OPH = int.from_bytes(b"nd:oph64", "little")
TAG_BAND = int.from_bytes(b"nd:bands", "little")

_CLASSIC = 0
_OPH = 1

# numba turns `uint64 op int-literal` into int64/float64 arithmetic: constants are np.uint64.
_P = np.uint64(MERSENNE_61)
_M32 = np.uint64(0xFFFFFFFF)
_M29 = np.uint64((1 << 29) - 1)
_S3 = np.uint64(3)
_S29 = np.uint64(29)
_S32 = np.uint64(32)
_S61 = np.uint64(61)
_S63 = np.uint64(63)
_U0 = np.uint64(0)
_OPH_NONE = np.uint64(1 << 32)  # above every 32-bit bin value: "bin still empty"
_EMPTY32 = np.uint32(EMPTY_SLOT)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


# --------------------------------------------------------------------------------------------
# Parameters


@lru_cache(maxsize=32)
def _permutations_cached(num_perm: int, seed: int) -> tuple[U64Array, U64Array]:
    s = splitmix64(seed, 2 * num_perm)
    a = np.uint64(1) + s[0::2] % np.uint64(MERSENNE_61 - 1)
    b = s[1::2] % np.uint64(MERSENNE_61)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


def permutations(num_perm: int, seed: int) -> tuple[U64Array, U64Array]:
    """(a, b) uint64 of length num_perm: a_i in [1, p-1], b_i in [0, p-1], p = 2^61 - 1."""
    _check_num_perm(num_perm)
    a, b = _permutations_cached(int(num_perm), int(seed) & MASK64)
    return a.copy(), b.copy()


@lru_cache(maxsize=32)
def _kernel_params(
    method: str, num_perm: int, seed: int
) -> tuple[int, U64Array, U64Array, U64Array, U64Array]:
    """(method code, a_lo, a_hi, b, oph keys); unused arrays are empty, not absent, so both
    methods share one numba specialization."""
    empty = np.empty(0, dtype=np.uint64)
    if method == "classic":
        a, b = _permutations_cached(num_perm, seed)
        return _CLASSIC, a & _M32, a >> _S32, b.copy(), empty
    if method == "oph":
        return _OPH, empty, empty, empty, splitmix64(seed ^ TAG_OPH, 2)
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _check_num_perm(num_perm: int) -> None:
    if not 1 <= int(num_perm) <= MAX_NUM_PERM:
        raise ValueError(f"num_perm must be in [1, {MAX_NUM_PERM}], got {num_perm}")


# --------------------------------------------------------------------------------------------
# Kernels


@njit(cache=True, nogil=True)
def _classic_segment(
    hs: U64Array,
    lo: int,
    hi: int,
    a_lo: U64Array,
    a_hi: U64Array,
    b: U64Array,
    mins: U64Array,
    out_row: U32Array,
) -> None:
    k = a_lo.shape[0]
    if hi <= lo:
        out_row[:] = _EMPTY32
        return
    mins[:] = _P  # above every value and below 2^63, as the arithmetic min below requires
    for t in range(lo, hi):
        x = hs[t]
        x = (x & _P) + (x >> _S61)
        if x >= _P:
            x -= _P
        x_lo = x & _M32
        x_hi = x >> _S32
        # Slots innermost, branch-free, over contiguous arrays: LLVM vectorizes this loop.
        # a*x = hh 2^64 + mid 2^32 + ll with hh < 2^58, mid < 2^62, ll < 2^64; mod p,
        # 2^64 = 8 and mid 2^32 = (mid >> 29) + (mid mod 2^29) 2^32. The sum below stays
        # under 2^64, and one fold plus one conditional subtraction lands in [0, p).
        # The `& _M32` masks are no-ops that let LLVM use one 32x32->64 vpmuludq per product.
        for i in range(k):
            al = a_lo[i] & _M32
            ah = a_hi[i] & _M32
            ll = al * x_lo
            mid = ah * x_lo + al * x_hi
            hh = ah * x_hi
            s = (hh << _S3) + (mid >> _S29) + ((mid & _M29) << _S32) + (ll & _P) + (ll >> _S61) + b[i]
            s = (s & _P) + (s >> _S61)
            s = s - _P if s >= _P else s
            # Arithmetic min (values < 2^61, so the sign of s - m is exact): an `if`/min()
            # here becomes a masked vector store (vpmaskmovq), which is slow on AMD cores.
            m = mins[i]
            d = s - m
            mins[i] = m + (d & (_U0 - (d >> _S63)))
    for i in range(k):
        out_row[i] = np.uint32(mins[i] & _M32)


@njit(cache=True, nogil=True)
def _oph_segment(hs: U64Array, lo: int, hi: int, keys: U64Array, bins: U64Array, out_row: U32Array) -> None:
    k = bins.shape[0]
    if hi <= lo:
        out_row[:] = _EMPTY32
        return
    uk = np.uint64(k)
    mix = keys[0]
    dens = keys[1]
    bins[:] = _OPH_NONE
    for t in range(lo, hi):
        m = fmix64(hs[t] ^ mix)
        j = ((m >> _S32) * uk) >> _S32
        v = m & _M32
        # A store every time, not a branch: about half of a document's shingles lower their
        # bin, in no order a predictor could learn.
        b = bins[j]
        bins[j] = v if v < b else b
    for i in range(k):
        if bins[i] != _OPH_NONE:
            out_row[i] = np.uint32(bins[i])
            continue
        # Terminates: at least one bin is filled, and each probe hits it with prob >= 1/k.
        base = dens ^ (np.uint64(i) << _S32)
        attempt = np.uint64(0)
        while True:
            g = fmix64(base ^ attempt)
            j = ((g >> _S32) * uk) >> _S32
            if bins[j] != _OPH_NONE:
                out_row[i] = np.uint32(bins[j])
                break
            attempt += np.uint64(1)


@njit(cache=True, nogil=True)
def _sign_segment(
    hs: U64Array,
    lo: int,
    hi: int,
    method: int,
    a_lo: U64Array,
    a_hi: U64Array,
    b: U64Array,
    oph_keys: U64Array,
    scratch: U64Array,
    out_row: U32Array,
) -> None:
    if method == _CLASSIC:
        _classic_segment(hs, lo, hi, a_lo, a_hi, b, scratch, out_row)
    else:
        _oph_segment(hs, lo, hi, oph_keys, scratch, out_row)


@njit(cache=True, nogil=True)
def _sign_texts_kernel(
    starts: I64Array,
    ends: I64Array,
    data: npt.NDArray[np.uint8],
    word_mode: bool,
    n: int,
    char_n: int,
    keys: U64Array,
    method: int,
    k: int,
    a_lo: U64Array,
    a_hi: U64Array,
    b: U64Array,
    oph_keys: U64Array,
) -> U32Array:
    ndocs = starts.shape[0]
    out = np.empty((ndocs, k), dtype=np.uint32)
    longest = 0
    for d in range(ndocs):
        longest = max(longest, ends[d] - starts[d])
    # A document has at most one shingle per byte (or one in all, when shorter than n).
    buf = np.empty(longest + 1, dtype=np.uint64)
    ring = np.empty(2 * max(n, 1), dtype=np.uint64)
    scratch = np.empty(k, dtype=np.uint64)
    for d in range(ndocs):
        c = doc_shingles(data, starts[d], ends[d], word_mode, n, char_n, keys, ring, buf, 0)
        _sign_segment(buf, 0, c, method, a_lo, a_hi, b, oph_keys, scratch, out[d])
    return out


@njit(cache=True, nogil=True)
def _band_keys_kernel(sigs: U32Array, bands: int, rows: int, k0: np.uint64, k1: np.uint64) -> U64Array:
    n = sigs.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    for d in range(n):
        for j in range(bands):
            h = fmix64(k0 + np.uint64(j) * _GOLDEN)
            base = j * rows
            for r in range(rows):
                h = (rotl(h, _S29) ^ np.uint64(sigs[d, base + r])) * k1
            out[d, j] = fmix64(h)
    return out


# --------------------------------------------------------------------------------------------
# Public API


def signatures(
    texts: pa.Array | pa.ChunkedArray,
    *,
    unit: str,
    ngram: int,
    char_ngram: int,
    num_perm: int,
    seed: int,
    method: str,
) -> U32Array:
    """(n, num_perm) uint32 MinHash signatures of already normalized texts, shingled on the
    fly from the Arrow buffers. Equal, slot for slot, to
    ``signatures_from_hashes(*shingle_hashes(texts, unit, ngram, char_ngram, seed), ...)``."""
    word_mode = check_shingle_args(unit, ngram, char_ngram)
    _check_num_perm(num_perm)
    seed = int(seed) & MASK64
    code, a_lo, a_hi, b, oph_keys = _kernel_params(method, int(num_perm), seed)
    starts, ends, data = text_buffers(texts)
    return _sign_texts_kernel(
        starts, ends, data, word_mode, int(ngram), int(char_ngram), shingle_keys(seed),
        code, int(num_perm), a_lo, a_hi, b, oph_keys,
    )  # fmt: skip


def band_keys(sigs: np.ndarray, bands: int, rows: int, seed: int) -> I64Array:
    """(n, bands) int64: band j hashes slots [j*rows, (j+1)*rows) with j and the seed mixed in.

    ``sigs`` may be any integer dtype holding uint32 slot values (int32 from a Spark
    IntegerType round trip included: values are taken mod 2^32)."""
    s = np.asarray(sigs)
    if s.ndim != 2:
        raise ValueError(f"sigs must be 2-d (n, num_perm), got shape {s.shape}")
    if bands < 1 or rows < 1 or bands * rows > s.shape[1]:
        raise ValueError(f"need bands, rows >= 1 and bands * rows <= {s.shape[1]}")
    s = np.ascontiguousarray(s.astype(np.uint32, copy=False))
    k = splitmix64((int(seed) & MASK64) ^ TAG_BAND, 2)
    out = _band_keys_kernel(s, int(bands), int(rows), k[0], k[1] | np.uint64(1))
    return out.view(np.int64)


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> npt.NDArray[np.float64]:
    """Row-wise fraction of equal slots (shapes (n, k) and (n, k), or broadcastable)."""
    a = np.asarray(sig_a)
    b = np.asarray(sig_b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"signature lengths differ: {a.shape[-1]} != {b.shape[-1]}")
    return np.mean(a == b, axis=-1, dtype=np.float64)
