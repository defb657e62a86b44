"""The observed S-curve of a sample of documents, for `neardup tune --input`. No Spark.

Which documents (`sample_keys`, per batch in the Spark stage `stages/tune_sample.py`): the
`size` documents with the smallest sample key, a MinHash value of one slot under a seed of
its own (derived from minhash.seed). Two documents of Jaccard J have the same key with
probability J, so near duplicates enter the sample together; a uniform sample of n out of
N documents would keep only (n / N)^2 of the corpus's similar pairs, none at all from a
large corpus. Ties are broken by id, so the sample does not depend on partitioning.

Which pairs (`measure_pairs`, on the driver): exact copies are settled first, as dedup
does (one document per normalized text). Candidates come from a second, independent
banding (64 bands of 2 slots of a signature under another derived seed: P(0.3) = 0.998),
whose collisions say nothing about the job's own, and are scored by the exact Jaccard of
their shingle sets (the job's normalization and shingling). Each document then goes into
one pair at most: pairs that share a document are not independent trials (if A-B and
A-C collide in the same band, so does B-C), and the test in `kernels/scurve_fit.py` counts
binomial trials. First a greedy matching of the candidates of similarity >= 0.3, in an
order drawn from the selection seed; then random pairs of the documents left, nearly all
of similarity near 0. Nothing in the selection reads the job's signatures or banding;
for each chosen pair the job's band keys (its signatures, seed, bands and rows) say
whether it collided.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from neardup import columns as C
from neardup.kernels.buckets import pair_indices
from neardup.kernels.hashing import MASK64, shingle_hashes, splitmix64, text_hash128
from neardup.kernels.jit import njit
from neardup.kernels.minhash import band_keys, signatures
from neardup.kernels.scurve_fit import LOW_EDGE
from neardup.kernels.signatures import SignParams
from neardup.kernels.similarity import jaccard_of_pairs
from neardup.kernels.textnorm import normalize

F64Array = npt.NDArray[np.float64]
I64Array = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

TAG_SAMPLE = int.from_bytes(b"nd:sampl", "little")
TAG_PAIRS = int.from_bytes(b"nd:pairs", "little")
SELECT_BANDS, SELECT_ROWS = 64, 2
BUCKET_CAP = 64  # a larger bucket of the selection banding is cut into runs of this many
MAX_CANDIDATES = 2_000_000  # candidates scored at most (a seeded subset beyond)
RANDOM_PAIRS = 1000

_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def derived_seed(seed: int, tag: int) -> int:
    """A seed for one purpose of tune, from minhash.seed: unrelated to the job's hashes."""
    return int(splitmix64((int(seed) ^ tag) & MASK64, 1)[0]) & ((1 << 63) - 1)


def _normalized(texts: pa.Array | pa.ChunkedArray, p: SignParams) -> pa.Array:
    return normalize(pc.fill_null(texts, ""), lowercase=p.lowercase, strip_punctuation=p.strip_punctuation)


def _signatures(norm: pa.Array, p: SignParams, num_perm: int, seed: int, method: str) -> np.ndarray:
    return signatures(
        norm,
        unit=p.unit,
        ngram=p.ngram,
        char_ngram=p.char_ngram,
        num_perm=num_perm,
        seed=seed,
        method=method,
    )


def sample_keys(batch: pa.RecordBatch, p: SignParams) -> pa.RecordBatch:
    """(_id, _text) -> (_id, _sample_key: int64, _bytes: int64) for the rows dedup would
    sign (text neither null nor empty after normalization). `_bytes`: the text's UTF-8 bytes."""
    text = batch.column(C.TEXT)
    norm = _normalized(text, p)
    signed = pc.greater(pc.binary_length(norm), 0)
    key = _signatures(norm, p, 1, derived_seed(p.seed, TAG_SAMPLE), "oph")[:, 0].astype(np.int64)
    size = pc.fill_null(pc.binary_length(text), 0).cast(pa.int64())
    out = pa.RecordBatch.from_arrays(
        [batch.column(C.DOC_ID), pa.array(key, pa.int64()), size], names=[C.DOC_ID, C.SAMPLE_KEY, C.BYTES]
    )
    return out.filter(signed)


@dataclass(frozen=True)
class MeasuredPairs:
    documents: int  # sample documents with text to sign
    distinct: int  # after exact copies
    candidates: int  # pairs proposed by the selection banding (and scored)
    random: int  # of the measured pairs, those drawn at random (the rest: similar candidates)
    left: I64Array  # each measured pair: its two documents, as positions in the input texts
    right: I64Array
    similarity: F64Array  # exact Jaccard of each measured pair
    collided: BoolArray  # whether the pair shares one of the job's band keys


def _mix(x: U64Array) -> U64Array:
    """MurmurHash3's finalizer over an array (an order no one can game, from a seed)."""
    x = x ^ (x >> _S33)
    x = x * _FMIX1
    x = x ^ (x >> _S33)
    x = x * _FMIX2
    return x ^ (x >> _S33)


def _bucket_pairs(keys: np.ndarray, cap: int) -> tuple[I64Array, I64Array]:
    """(left < right) row pairs that share a key in any band; buckets larger than `cap`
    give the pairs within consecutive runs of `cap` of their rows."""
    bands = keys.shape[1]
    flat = keys.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    sizes = np.diff(np.concatenate([starts, [flat.size]]))
    starts, sizes = starts[sizes > 1], sizes[sizes > 1]
    pieces = -(-sizes // cap)
    first = np.repeat(starts, pieces)
    offset = (np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)) * cap
    chunk = np.minimum(cap, np.repeat(sizes, pieces) - offset)
    i, j = pair_indices(first + offset, chunk)
    a, b = order[i] // bands, order[j] // bands
    keep = a != b
    return np.minimum(a, b)[keep], np.maximum(a, b)[keep]


@njit(cache=True, nogil=True)
def _greedy_matching(left: I64Array, right: I64Array, n: int) -> BoolArray:
    used = np.zeros(n, dtype=np.bool_)
    keep = np.zeros(left.shape[0], dtype=np.bool_)
    for t in range(left.shape[0]):
        a = left[t]
        b = right[t]
        if not used[a] and not used[b]:
            used[a] = True
            used[b] = True
            keep[t] = True
    return keep


def measure_pairs(
    texts: pa.Array | pa.ChunkedArray,
    p: SignParams,
    random_pairs: int = RANDOM_PAIRS,
    max_candidates: int = MAX_CANDIDATES,
) -> MeasuredPairs:
    """The pairs of the module docstring, each with its similarity and collision."""
    norm = _normalized(texts, p)
    signed = np.asarray(pc.greater(pc.binary_length(norm), 0))
    position = np.flatnonzero(signed)
    norm = norm.filter(pa.array(signed))
    documents = len(norm)
    _, first = np.unique(text_hash128(norm), axis=0, return_index=True)
    first.sort()
    norm, position = norm.take(pa.array(first)), position[first]
    n = len(norm)
    if n < 2:
        none = np.empty(0, dtype=np.int64)
        return MeasuredPairs(documents, n, 0, 0, none, none, np.empty(0), np.empty(0, dtype=bool))
    seed = derived_seed(p.seed, TAG_PAIRS)
    select = _signatures(norm, p, SELECT_BANDS * SELECT_ROWS, seed, "oph")
    left, right = _bucket_pairs(band_keys(select, SELECT_BANDS, SELECT_ROWS, seed), BUCKET_CAP)
    codes = np.unique(left * n + right).astype(np.uint64)
    if codes.size > max_candidates:
        codes = np.sort(codes[np.argsort(_mix(codes ^ np.uint64(seed)), kind="stable")[:max_candidates]])
    left, right = (codes // np.uint64(n)).astype(np.int64), (codes % np.uint64(n)).astype(np.int64)
    offsets, hashes = shingle_hashes(norm, p.unit, p.ngram, p.char_ngram, p.seed)
    similarity = jaccard_of_pairs(offsets, hashes, left, right)
    # The similar candidates first, in a seeded order: the matching keeps as many pairs
    # over [0.3, 1] as it can, and which ones depends on nothing the job computes.
    similar = np.flatnonzero(similarity >= LOW_EDGE)
    order = similar[np.argsort(_mix(codes[similar] ^ np.uint64(seed)), kind="stable")]
    chosen = order[_greedy_matching(left[order], right[order], n)]
    # Then random pairs of the documents left: nearly all of similarity near 0.
    used = np.zeros(n, dtype=bool)
    used[left[chosen]] = True
    used[right[chosen]] = True
    rest = np.random.Generator(np.random.PCG64(seed)).permutation(np.flatnonzero(~used))
    count = min(random_pairs, rest.size // 2)
    a, b = rest[0 : 2 * count : 2], rest[1 : 2 * count : 2]
    left = np.concatenate([left[chosen], np.minimum(a, b)])
    right = np.concatenate([right[chosen], np.maximum(a, b)])
    similarity = np.concatenate([similarity[chosen], jaccard_of_pairs(offsets, hashes, a, b)])
    order = np.argsort(left, kind="stable")
    left, right, similarity = left[order], right[order], similarity[order]
    keys = band_keys(_signatures(norm, p, p.num_perm, p.seed, p.method), p.bands, p.rows, p.seed)
    collided = np.any(keys[left] == keys[right], axis=1)
    return MeasuredPairs(
        documents, n, int(codes.size), int(count), position[left], position[right], similarity, collided
    )
