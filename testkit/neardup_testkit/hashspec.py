"""The hash and signature definitions of neardup's kernels, re-implemented from their
docstrings in plain Python integers (slow, obviously correct). The unit tests compare the
numba kernels with these, so a drift in a kernel fails there; nothing here imports neardup.
"""

from __future__ import annotations

M64 = (1 << 64) - 1
M32 = 0xFFFFFFFF
P = (1 << 61) - 1  # the Mersenne prime of classic MinHash
EMPTY_SLOT = 0xFFFFFFFF
TAGS = {
    "word": int.from_bytes(b"nd:words", "little"),
    "char": int.from_bytes(b"nd:chars", "little"),
    "text": int.from_bytes(b"nd:text2", "little"),
    "oph": int.from_bytes(b"nd:oph64", "little"),
    "band": int.from_bytes(b"nd:bands", "little"),
}
TEXT_SEED = 0x6E65617264757031  # the documented default seed of text_hash128


def splitmix64(seed: int, count: int) -> list[int]:
    out = []
    state = seed & M64
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out.append(z ^ (z >> 31))
    return out


def rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def fmix64(z: int) -> int:
    z ^= z >> 33
    z = (z * 0xFF51AFD7ED558CCD) & M64
    z ^= z >> 33
    z = (z * 0xC4CEB9FE1A85EC53) & M64
    return z ^ (z >> 33)


def hash_bytes(b: bytes, k0: int, k1: int, k2: int) -> int:
    h = k0
    full = len(b) // 8 * 8
    for i in range(0, full, 8):
        w = int.from_bytes(b[i : i + 8], "little")
        w = (rotl((w * k1) & M64, 31) * k2) & M64
        h = (rotl(h ^ w, 27) * 5 + 0x52DCE729) & M64
    if full < len(b):
        w = int.from_bytes(b[full:], "little")
        h ^= (rotl((w * k1) & M64, 31) * k2) & M64
    return fmix64(h ^ len(b))


def hash_keys(seed: int, tag: str, count: int) -> list[int]:
    s = splitmix64(seed ^ TAGS[tag], count)
    return [s[0], s[1] | 1, s[2] | 1, *s[3:]]


def shingles(text: str, unit: str, n: int, char_n: int) -> set[tuple[str, ...]]:
    """Of an already normalized text: word shingles as ("w", w1, ..., wn), character
    shingles as ("c", ngram); fewer than n words falls back to character n-grams."""
    if unit == "word":
        words = [w for w in text.split(" ") if w]
        if len(words) >= n:
            return {("w", *words[j : j + n]) for j in range(len(words) - n + 1)}
        n = char_n
    if not text:
        return set()
    if len(text) < n:
        return {("c", text)}
    return {("c", text[j : j + n]) for j in range(len(text) - n + 1)}


def shingle_hash(sh: tuple[str, ...], seed: int) -> int:
    if sh[0] == "c":
        k0, k1, k2 = hash_keys(seed, "char", 3)
        return hash_bytes(sh[1].encode(), k0, k1, k2)
    w0, w1, w2, c0, c1 = hash_keys(seed, "word", 5)
    c1 |= 1
    h = c0
    for word in sh[1:]:
        h = ((rotl(h, 29) ^ hash_bytes(word.encode(), w0, w1, w2)) * c1) & M64
    return fmix64(h)


def text_hash(text: str, seed: int = TEXT_SEED) -> tuple[int, int]:
    s = splitmix64(seed ^ TAGS["text"], 6)
    b = text.encode()
    return hash_bytes(b, s[0], s[1] | 1, s[2] | 1), hash_bytes(b, s[3], s[4] | 1, s[5] | 1)


def permutations(num_perm: int, seed: int) -> tuple[list[int], list[int]]:
    s = splitmix64(seed, 2 * num_perm)
    return [1 + v % (P - 1) for v in s[0::2]], [v % P for v in s[1::2]]


def classic(hashes: list[int], num_perm: int, seed: int) -> list[int]:
    if not hashes:
        return [EMPTY_SLOT] * num_perm
    a, b = permutations(num_perm, seed)
    return [min((ai * (x % P) + bi) % P for x in hashes) & M32 for ai, bi in zip(a, b, strict=True)]


def oph(hashes: list[int], k: int, seed: int) -> list[int]:
    if not hashes:
        return [EMPTY_SLOT] * k
    mix, dens = splitmix64(seed ^ TAGS["oph"], 2)
    bins: list[int | None] = [None] * k
    for x in hashes:
        m = fmix64(x ^ mix)
        j = ((m >> 32) * k) >> 32
        v = m & M32
        cur = bins[j]
        if cur is None or v < cur:
            bins[j] = v
    out = []
    for i in range(k):
        got = bins[i]
        t = 0
        while got is None:
            g = fmix64(dens ^ ((i << 32) | t))
            got = bins[((g >> 32) * k) >> 32]
            t += 1
        out.append(got)
    return out


def band_keys(sig: list[int], bands: int, rows: int, seed: int) -> list[int]:
    b0, b1 = splitmix64(seed ^ TAGS["band"], 2)
    b1 |= 1
    keys = []
    for j in range(bands):
        h = fmix64((b0 + j * 0x9E3779B97F4A7C15) & M64)
        for v in sig[j * rows : (j + 1) * rows]:
            h = ((rotl(h, 29) ^ v) * b1) & M64
        h = fmix64(h)
        keys.append(h - (1 << 64) if h >= 1 << 63 else h)
    return keys
