"""Eight bytes at a time: a little-endian load and store at any byte offset, and the masks
the text kernels test a load with (shingling's word ends, normalization's fast path).

Scanning text a byte at a time costs a branch a byte, and a mispredicted one at each word's
end; one 8-byte load tested with a few integer operations costs neither. Each test here is
exact in the bytes it flags, so a kernel can take its fast path on what they say.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.kernels.jit import njit

U8Array = npt.NDArray[np.uint8]

# numba types `uint64 op int-literal` as int64: every constant is a np.uint64 (or np.uintp)
# global, frozen into the compiled code.
HIGH_BITS = np.uint64(0x8080808080808080)
SEVEN_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
SPACES = np.uint64(0x2020202020202020)
# FIRST_BYTES[k]: the low k bytes of a load (k = 0..8).
FIRST_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
# (1 << 8k) * _BYTE_INDEX holds k in its top byte.
_BYTE_INDEX = np.uint64(0x0001020304050607)
_U1 = np.uint64(1)
_P1, _P2, _P3, _P4 = np.uintp(1), np.uintp(2), np.uintp(3), np.uintp(4)
_P5, _P6, _P7 = np.uintp(5), np.uintp(6), np.uintp(7)
_S7, _S8, _S16, _S24 = np.uint64(7), np.uint64(8), np.uint64(16), np.uint64(24)
_S32, _S40, _S48, _S56 = np.uint64(32), np.uint64(40), np.uint64(48), np.uint64(56)


@njit(cache=True, nogil=True, inline="always")
def load8(data: U8Array, i: int | np.uintp) -> np.uint64:
    """data[i:i+8] as a little-endian uint64 (LLVM merges the eight loads into one; the
    unsigned index spares each of them numba's negative-index check)."""
    p = np.uintp(i)
    return (
        np.uint64(data[p])
        | (np.uint64(data[p + _P1]) << _S8)
        | (np.uint64(data[p + _P2]) << _S16)
        | (np.uint64(data[p + _P3]) << _S24)
        | (np.uint64(data[p + _P4]) << _S32)
        | (np.uint64(data[p + _P5]) << _S40)
        | (np.uint64(data[p + _P6]) << _S48)
        | (np.uint64(data[p + _P7]) << _S56)
    )


@njit(cache=True, nogil=True, inline="always")
def store8(out: U8Array, i: int | np.uintp, x: np.uint64) -> None:
    """out[i:i+8] = the little-endian bytes of x."""
    p = np.uintp(i)
    out[p] = np.uint8(x & np.uint64(0xFF))
    out[p + _P1] = np.uint8((x >> _S8) & np.uint64(0xFF))
    out[p + _P2] = np.uint8((x >> _S16) & np.uint64(0xFF))
    out[p + _P3] = np.uint8((x >> _S24) & np.uint64(0xFF))
    out[p + _P4] = np.uint8((x >> _S32) & np.uint64(0xFF))
    out[p + _P5] = np.uint8((x >> _S40) & np.uint64(0xFF))
    out[p + _P6] = np.uint8((x >> _S48) & np.uint64(0xFF))
    out[p + _P7] = np.uint8(x >> _S56)


@njit(cache=True, nogil=True, inline="always")
def zero_bytes(x: np.uint64) -> np.uint64:
    """The high bit of every byte of x that is 0, and no other bit."""
    nonzero = ((x & SEVEN_BITS) + SEVEN_BITS) | x
    return ~nonzero & HIGH_BITS


@njit(cache=True, nogil=True, inline="always")
def lowest_byte(flags: np.uint64) -> int:
    """The index (0-7) of the lowest byte whose high bit is set in `flags` (not 0)."""
    lowest = flags & (~flags + _U1)
    return int(((lowest >> _S7) * _BYTE_INDEX) >> _S56)
