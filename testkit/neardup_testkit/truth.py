"""Exact ground truth for generated corpora, fast (vectorized), with cluster scoring and a
corpus cache; used by the benchmarks and the large tests.

Independent of neardup's kernels on purpose (only the corpus generator is shared): the
ground truth is computed from exact shingle sets, never from signatures, so a bug in a
kernel cannot cancel out here.

Ground truth. The true duplicate pairs are the pairs of documents whose exact word-5-gram
Jaccard similarity, after normalization (NFKC, lowercase, whitespace collapsed), is at
least the threshold; the ideal clustering is the connected components of that graph. The
generator plants all similarity: documents outside a planted cluster are independent
draws from a 50,000-word Zipfian vocabulary, and edited copies only mix a base with fresh
draws, so only documents of the same planted `cluster` can be similar. Brute force within
planted clusters (at most `max_cluster_size` documents each) is then exact and linear in
the corpus. `check_no_cross_cluster` tests that premise on a sample with an exact
all-pairs similarity join, and the report prints what it found.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_testkit import synth
from neardup_testkit.synth import CorpusSpec

NGRAM = 5
# Documents per ground-truth chunk: bounds memory at a few GB for 1M-document corpora
# (only clustered documents are shingled, ~30 % of the corpus).
_CHUNK_DOCS = 40_000
_WHOLE_CLUSTER_LIMIT = 1000  # the cross-cluster check takes whole planted clusters up to this size


# --------------------------------------------------------------------------- corpus cache


@dataclass(frozen=True)
class Corpus:
    spec: CorpusSpec
    path: Path  # one Parquet file, the generator's row order
    shards: Path  # the same rows split into `num_shards` files, for tools that read per task
    num_shards: int
    key: str


def corpus_key(spec: CorpusSpec) -> str:
    """Changes with the spec, the generator's source and numpy's version (its streams)."""
    source = Path(synth.__file__).read_bytes()
    h = hashlib.sha256(repr(spec).encode() + source + np.__version__.encode()).hexdigest()[:12]
    return f"{spec.num_docs}d-s{spec.seed}-c{spec.mean_chars}-{h}"


def ensure_corpus(spec: CorpusSpec, root: Path, num_shards: int) -> tuple[Corpus, bool]:
    """Generate (or reuse) the corpus under root; returns it and whether it was reused.

    num_shards=0 makes no shard copies (only the peers read them; at 10,000,000
    documents they would be another 15 GB).
    """
    key = corpus_key(spec)
    base = root / key
    path = base / "corpus.parquet"
    shards = base / f"shards{num_shards}"
    reused = path.exists() and (num_shards == 0 or shards.exists())
    if not path.exists():
        base.mkdir(parents=True, exist_ok=True)
        tmp = base / f"corpus.parquet.tmp{os.getpid()}"
        synth.write_parquet(synth.iter_batches(spec), tmp)
        tmp.rename(path)  # atomic: a crashed generation never looks complete
    if num_shards and not shards.exists():
        tmp_dir = base / f"shards.tmp{os.getpid()}"
        tmp_dir.mkdir(parents=True)
        table = pq.read_table(path)
        bounds = np.linspace(0, table.num_rows, num_shards + 1).astype(np.int64)
        for i in range(num_shards):
            part = table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i]))
            pq.write_table(part, tmp_dir / f"{i:05d}.parquet")
        tmp_dir.rename(shards)
    return Corpus(spec, path, shards, num_shards, key), reused


# --------------------------------------------------------------------------- shingles


def normalized_words(texts: pa.ChunkedArray | pa.Array) -> pa.ListArray:
    """Words of every text after NFKC, lowercase and whitespace collapse (as neardup normalizes).

    pyarrow's Unicode whitespace set can differ from Python's str.isspace() on a few
    control characters; the generated corpus uses only space, newline and tab.
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    norm = pc.utf8_trim_whitespace(pc.utf8_lower(pc.utf8_normalize(texts, "NFKC")))
    return pc.utf8_split_whitespace(norm)


_MIX1 = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xC2B2AE3D27D4EB4F)


def group_order(major: np.ndarray, k1: np.ndarray, k2: np.ndarray) -> np.ndarray:
    """A permutation that groups rows by `major` (ascending) and, within it, puts rows
    with equal (k1, k2) next to each other. Exact.

    One argsort of a packed int64 key (major's dense rank above a 40-bit hash of
    (k1, k2)) instead of np.lexsort over three columns (5x slower on tens of millions of
    rows). If two different (k1, k2) of one major share a hash, equal rows might not be
    adjacent: then the exact lexsort is used instead.
    """
    if len(major) == 0:
        return np.zeros(0, np.int64)
    _, rank = np.unique(major, return_inverse=True)
    if rank.max() >= 1 << 23:
        return np.lexsort((k2, k1, major))
    with np.errstate(over="ignore"):
        h = (k1.astype(np.uint64) * _MIX1) ^ (k2.astype(np.uint64) * _MIX2)
        h ^= h >> np.uint64(29)
        h *= _MIX1
    key = (rank.astype(np.int64) << 40) | (h >> np.uint64(24)).astype(np.int64)
    order = np.argsort(key, kind="stable")
    ks, a, b = key[order], k1[order], k2[order]
    collided = (ks[1:] == ks[:-1]) & ((a[1:] != a[:-1]) | (b[1:] != b[:-1]))
    if collided.any():
        return np.lexsort((k2, k1, major))
    return order


def shingle_rows(words: pa.ListArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct word 5-grams per document, exactly, as (doc, key1, key2) int64 rows.

    Words become dense codes (dictionary encoding, per call); a 5-gram (c0..c4) is the
    pair (c0 V^2 + c1 V + c2, c3 V + c4), exact while V^3 < 2^63. Rows are grouped by
    doc (ascending) without repeats. Every generated document has at least 8 words, so
    the character-n-gram fallback of short documents is never needed; one is refused.
    """
    offsets = words.offsets.to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    if len(counts) and counts.min() < NGRAM:
        raise ValueError("a document has fewer than 5 words: not supported by this reference")
    flat = words.flatten()
    encoded = pc.dictionary_encode(flat)
    codes = encoded.indices.to_numpy().astype(np.int64)
    vocab = len(encoded.dictionary)
    if vocab >= 2**21:
        raise ValueError("vocabulary too large for exact two-key 5-gram codes")
    n = len(codes) - (NGRAM - 1)
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    doc_of_word = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    start = np.arange(n)
    valid = doc_of_word[start] == doc_of_word[start + NGRAM - 1]  # window inside one document
    s = start[valid]
    k1 = (codes[s] * vocab + codes[s + 1]) * vocab + codes[s + 2]
    k2 = codes[s + 3] * vocab + codes[s + 4]
    doc = doc_of_word[s]
    order = group_order(doc, k1, k2)
    doc, k1, k2 = doc[order], k1[order], k2[order]
    first = np.r_[True, (doc[1:] != doc[:-1]) | (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1])]
    return doc[first], k1[first], k2[first]


def _run_pairs(group: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (member[i], member[j]), i < j, of runs of equal `group` (inputs sorted by group).

    Vectorized by offset: for d = 1..longest run - 1, positions i with group[i] ==
    group[i + d]. Linear per offset; runs here are short (planted clusters, or the rare
    shingles of a prefix filter).
    """
    a_parts, b_parts = [], []
    if len(group) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    new = np.r_[True, group[1:] != group[:-1]]
    run_start = np.flatnonzero(new)
    longest = int(np.diff(np.r_[run_start, len(group)]).max())
    for d in range(1, longest):
        same = group[d:] == group[:-d]
        idx = np.flatnonzero(same)
        a_parts.append(member[idx])
        b_parts.append(member[idx + d])
    if not a_parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(a_parts), np.concatenate(b_parts)


def _pair_overlaps(
    doc: np.ndarray, k1: np.ndarray, k2: np.ndarray, group_of_doc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, |A ∩ B|) for every pair of documents of the same group sharing a shingle."""
    g = group_of_doc[doc]
    order = group_order(g, k1, k2)
    g, k1s, k2s, docs = g[order], k1[order], k2[order], doc[order]
    same_key = np.r_[False, (g[1:] == g[:-1]) & (k1s[1:] == k1s[:-1]) & (k2s[1:] == k2s[:-1])]
    run = np.cumsum(~same_key)
    a, b = _run_pairs(run, docs)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    n = int(doc.max()) + 1 if len(doc) else 1
    keys, inter = np.unique(lo * n + hi, return_counts=True)
    return keys // n, keys % n, inter


# --------------------------------------------------------------------------- components


def components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Label of each of n nodes = the smallest node of its connected component.

    Min-label propagation with pointer jumping, vectorized: each round pulls the smaller
    label across every edge, then shortcuts labels to their labels' labels. Rounds grow
    with the log of the component diameter, a handful for duplicate clusters.
    """
    labels = np.arange(n, dtype=np.int64)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if len(a) == 0:
        return labels
    while True:
        la, lb = labels[a], labels[b]
        m = np.minimum(la, lb)
        before = labels.copy()
        np.minimum.at(labels, la, m)  # the roots too: links whole trees, not just endpoints
        np.minimum.at(labels, lb, m)
        np.minimum.at(labels, a, m)
        np.minimum.at(labels, b, m)
        while True:  # pointer jumping to a fixed point
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
        if np.array_equal(labels, before):
            return labels


# --------------------------------------------------------------------------- ground truth


@dataclass(frozen=True)
class Truth:
    labels: np.ndarray  # int64 per row: smallest row of its true component
    similar_pairs: int  # pairs with J >= threshold (edges of the truth graph)
    true_pairs: int  # pairs within true components (what a perfect clustering predicts)
    duplicate_clusters: int  # true components of 2 or more documents
    largest: int
    sample_docs: int  # documents in the cross-cluster check
    sample_within_pairs: int  # similar pairs the check found inside planted clusters (its sanity)
    sample_cross_pairs: int  # similar pairs across planted clusters: 0 if the premise holds
    sample_max_cross_jaccard: float


def _comb2(x: np.ndarray) -> int:
    x = x.astype(np.int64)
    return int((x * (x - 1) // 2).sum())


def ground_truth(table: pa.Table, threshold: float, sample: int, seed: int = 7) -> Truth:
    """Exact truth for a generated corpus (see the module docstring)."""
    n = table.num_rows
    cluster = table.column("cluster").to_numpy()
    rows = np.flatnonzero(cluster >= 0)
    rows = rows[np.argsort(cluster[rows], kind="stable")]  # whole clusters are contiguous
    ca, cb = [], []
    start = 0
    while start < len(rows):
        end = min(start + _CHUNK_DOCS, len(rows))
        while end < len(rows) and cluster[rows[end]] == cluster[rows[end - 1]]:
            end += 1  # never split a planted cluster across chunks
        chunk = rows[start:end]
        words = normalized_words(table.column("text").take(pa.array(chunk)))
        doc, k1, k2 = shingle_rows(words)
        sizes = np.bincount(doc, minlength=len(chunk))
        a, b, inter = _pair_overlaps(doc, k1, k2, cluster[chunk])
        union = sizes[a] + sizes[b] - inter
        ok = inter >= threshold * union - 1e-9 * union
        ca.append(chunk[a[ok]])
        cb.append(chunk[b[ok]])
        start = end
    ea = np.concatenate(ca) if ca else np.zeros(0, np.int64)
    eb = np.concatenate(cb) if cb else np.zeros(0, np.int64)
    labels = components(n, ea, eb)
    return Truth(labels=labels, similar_pairs=len(ea), **_figures(table, labels, threshold, sample, seed))


def _figures(table: pa.Table, labels: np.ndarray, threshold: float, sample: int, seed: int) -> dict[str, Any]:
    """The pair and component counts of a truth's labels, and the cross-cluster check's."""
    sizes = np.bincount(np.unique(labels, return_inverse=True)[1]) if len(labels) else np.zeros(0, np.int64)
    check = check_no_cross_cluster(table, threshold=min(threshold, 0.5), sample=sample, seed=seed)
    return {
        "true_pairs": _comb2(sizes),
        "duplicate_clusters": int((sizes >= 2).sum()),
        "largest": int(sizes.max()) if len(labels) else 0,
        "sample_docs": check[0],
        "sample_within_pairs": check[1],
        "sample_cross_pairs": check[2],
        "sample_max_cross_jaccard": check[3],
    }


@dataclass(frozen=True)
class SkewTruth:
    """Exact truth for a skewed corpus (`neardup_testkit.skew`): the base rows' own truth,
    and each skew group (the notice's copies, each planted cluster) one component."""

    labels: np.ndarray  # int64 per row: a row of its true component (the same for all of it)
    base: Truth  # the base rows' truth, its labels over the base rows alone
    groups: int  # skew groups
    skew_docs: int
    min_jaccard_to_base: float  # the smallest exact Jaccard of a skew copy to its group's base
    true_pairs: int
    duplicate_clusters: int
    largest: int
    sample_docs: int  # the cross-cluster check on the whole table, as in `Truth`
    sample_within_pairs: int
    sample_cross_pairs: int
    sample_max_cross_jaccard: float


def skewed_truth(
    table: pa.Table, threshold: float, sample: int, base: Truth | None = None, seed: int = 7
) -> SkewTruth:
    """Exact truth for the base corpus plus skew documents (rows with `cluster` >=
    `skew.CLUSTER_OFFSET`, in any row order).

    The base rows get `ground_truth` (or `base`, computed on them alone in the same order).
    A skew group is one true component because every copy's exact Jaccard to its group's
    base (the row with a null `target_jaccard`), measured here for every copy, is at least
    the threshold: a star through the base, which is in the corpus, joins them all. No pair
    of a 100,000-document group is needed beyond those. If a copy fell below the threshold
    the premise would fail and this raises. Groups join nothing else because only
    documents of one planted group are similar, which the cross-cluster check tests on a
    sample of the whole table.
    """
    from neardup_testkit.skew import CLUSTER_OFFSET

    # More than 2 GiB of text (a 1M-document base and its skew) overflows the int32 offsets
    # that taking rows out of several chunks would concatenate into.
    text = table.schema.get_field_index("text")
    table = table.set_column(text, "text", table.column(text).cast(pa.large_string()))
    n = table.num_rows
    cluster = table.column("cluster").to_numpy()
    skew_rows = np.flatnonzero(cluster >= CLUSTER_OFFSET)
    base_rows = np.flatnonzero(cluster < CLUSTER_OFFSET)
    if base is None:
        base = ground_truth(table.take(pa.array(base_rows)), threshold, sample=0)
    if len(base.labels) != len(base_rows):
        raise ValueError(f"base truth of {len(base.labels)} rows for {len(base_rows)} base rows")
    labels = np.empty(n, np.int64)
    labels[base_rows] = base_rows[base.labels]
    group = cluster[skew_rows]
    is_head = table.column("target_jaccard").is_null().to_numpy(zero_copy_only=False)[skew_rows]
    heads, head_of = _group_heads(group, is_head)
    labels[skew_rows] = skew_rows[heads[head_of]]
    worst = _min_jaccard_to_head(table.column("text"), skew_rows, head_of, heads)
    if worst < threshold:
        raise ValueError(f"a skew copy has Jaccard {worst:.4f} < {threshold} to its base: no star")
    return SkewTruth(
        labels=labels,
        base=base,
        groups=len(heads),
        skew_docs=len(skew_rows),
        min_jaccard_to_base=worst,
        **_figures(table, labels, threshold, sample, seed),
    )


def _group_heads(group: np.ndarray, is_head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of each group's head, each row's group index); exactly one head a group."""
    keys, head_of = np.unique(group, return_inverse=True)
    heads = np.full(len(keys), -1, np.int64)
    where = np.flatnonzero(is_head)
    if len(np.unique(head_of[where])) != len(where) or len(where) != len(keys):
        raise ValueError("every skew group needs exactly one base (a null target_jaccard)")
    heads[head_of[where]] = where
    return heads, head_of


def _min_jaccard_to_head(
    texts: pa.ChunkedArray, rows: np.ndarray, head_of: np.ndarray, heads: np.ndarray
) -> float:
    """The smallest exact word-5-gram Jaccard of a row to its group's head, in chunks of
    rows (each with the heads of its groups): a shingle is shared with the head when the
    run of equal (group, shingle) holds the head's row."""
    worst = 1.0
    for start in range(0, len(rows), _CHUNK_DOCS):
        part = np.arange(start, min(start + _CHUNK_DOCS, len(rows)))
        local = np.union1d(part, heads[np.unique(head_of[part])])  # positions in `rows`
        doc, k1, k2 = shingle_rows(normalized_words(texts.take(pa.array(rows[local]))))
        grp = head_of[local]
        is_head = heads[grp] == local
        order = group_order(grp[doc], k1, k2)
        d, g, a, b = doc[order], grp[doc][order], k1[order], k2[order]
        run = np.cumsum(np.r_[True, (g[1:] != g[:-1]) | (a[1:] != a[:-1]) | (b[1:] != b[:-1])]) - 1
        with_head = np.bincount(run, weights=is_head[d]) > 0
        shared = np.bincount(d, weights=with_head[run], minlength=len(local))
        size = np.bincount(doc, minlength=len(local))
        head_pos = np.searchsorted(local, heads[grp])  # each row's head, as a local row
        head_size = size[head_pos]
        jaccard = shared / (size + head_size - shared)
        if (~is_head).any():
            worst = min(worst, float(jaccard[~is_head].min()))
    return worst


def check_no_cross_cluster(
    table: pa.Table, threshold: float, sample: int, seed: int
) -> tuple[int, int, int, float]:
    """Exact all-pairs join (J >= threshold) on a sample; counts pairs within/across clusters.

    The sample is random rows plus whole planted clusters (a tenth of it), so the join
    must find the within-cluster pairs: a check that finds nothing proves nothing.
    Prefix filtering (Chaudhuri et al. 2006): order shingles rarest first; two sets with
    J >= t share one of the first |A| - ceil(t |A|) + 1 of each; candidates are then
    measured exactly. Returns (docs, within pairs, cross pairs, max cross Jaccard).
    """
    n = table.num_rows
    if n == 0 or sample <= 0:
        return 0, 0, 0, 0.0
    rng = np.random.default_rng(seed)
    cluster = table.column("cluster").to_numpy()
    picked = rng.choice(n, size=min(n, sample - sample // 10), replace=False)
    planted, members = np.unique(cluster[cluster >= 0], return_counts=True)
    # Whole clusters of at most this many (a skewed corpus's 100,000 copies would be
    # all pairs of the check; its random rows still hold some of them).
    planted = planted[members <= _WHOLE_CLUSTER_LIMIT]
    if len(planted):
        chosen = rng.choice(planted, size=min(len(planted), max(1, sample // 40)), replace=False)
        picked = np.union1d(picked, np.flatnonzero(np.isin(cluster, chosen)))
    picked = np.sort(picked)
    doc, k1, k2 = shingle_rows(normalized_words(table.column("text").take(pa.array(picked))))
    # Dense shingle codes across the sample (rows are unique per document already).
    order = np.lexsort((k2, k1))
    new = np.r_[True, (k1[order][1:] != k1[order][:-1]) | (k2[order][1:] != k2[order][:-1])]
    code = np.empty(len(doc), np.int64)
    code[order] = np.cumsum(new) - 1
    df = np.bincount(code)
    sizes = np.bincount(doc, minlength=len(picked))
    starts = np.r_[0, np.cumsum(sizes)]
    ranked = np.lexsort((code, df[code], doc))  # per document, rarest first
    position = np.arange(len(doc)) - starts[doc[ranked]]
    prefix = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    keep = ranked[position < prefix[doc[ranked]]]
    by_code = keep[np.argsort(code[keep], kind="stable")]
    a, b = _run_pairs(code[by_code], doc[by_code])
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    m = len(picked)
    cand = np.unique(lo * m + hi)
    sorted_codes = [np.sort(code[starts[i] : starts[i + 1]]) for i in range(m)]
    within = cross = 0
    max_cross = 0.0
    for key in cand.tolist():  # candidates are few: exact intersections one by one
        i, j = divmod(key, m)
        inter = len(np.intersect1d(sorted_codes[i], sorted_codes[j], assume_unique=True))
        jac = inter / (sizes[i] + sizes[j] - inter)
        same = cluster[picked[i]] >= 0 and cluster[picked[i]] == cluster[picked[j]]
        if not same:
            max_cross = max(max_cross, jac)
        if jac >= threshold:
            if same:
                within += 1
            else:
                cross += 1
    return m, within, cross, max_cross


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    ari: float
    predicted_pairs: int
    true_positive_pairs: int
    duplicate_clusters: int
    largest: int


def score(predicted: np.ndarray, truth: np.ndarray) -> Scores:
    """Pairwise precision/recall/F1 and the adjusted Rand index, from a contingency table.

    A predicted pair is two documents with the same predicted label; a true pair is two
    documents in the same true component. TP = sum over contingency cells of C(n_ij, 2).
    ARI (Hubert & Arabie 1985) = (TP - E) / (mean(P, T) - E) with E = P T / C(n, 2),
    P, T the predicted and true pair counts. No predicted pairs: precision 1; no true
    pairs: recall 1.
    """
    n = len(truth)
    if len(predicted) != n:
        raise ValueError(f"{len(predicted)} predicted labels for {n} documents")
    _, p = np.unique(predicted, return_inverse=True)
    _, t = np.unique(truth, return_inverse=True)
    cells = np.unique(p.astype(np.int64) * (int(t.max()) + 1 if n else 1) + t, return_counts=True)[1]
    tp = _comb2(cells)
    p_sizes = np.bincount(p)
    pred_pairs = _comb2(p_sizes)
    true_pairs = _comb2(np.bincount(t))
    precision = tp / pred_pairs if pred_pairs else 1.0
    recall = tp / true_pairs if true_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    total = n * (n - 1) // 2
    expected = pred_pairs * true_pairs / total if total else 0.0
    top = 0.5 * (pred_pairs + true_pairs) - expected
    ari = (tp - expected) / top if top else 1.0
    return Scores(
        precision=precision,
        recall=recall,
        f1=f1,
        ari=ari,
        predicted_pairs=pred_pairs,
        true_positive_pairs=tp,
        duplicate_clusters=int((p_sizes >= 2).sum()),
        largest=int(p_sizes.max()) if n else 0,
    )


def labels_from_ids(corpus_ids: np.ndarray, ids: np.ndarray, cluster_ids: np.ndarray) -> np.ndarray:
    """Per corpus row, a label from (id, cluster id) rows; rows absent get their own label.

    Labels are row numbers of the cluster's representative (when it is a corpus id) so
    that they never collide with a singleton's own row number.
    """
    n = len(corpus_ids)
    order = np.argsort(corpus_ids)
    sorted_ids = corpus_ids[order]

    def rows_of(values: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(sorted_ids, values)
        pos = np.minimum(pos, n - 1)
        found = sorted_ids[pos] == values
        out = np.full(len(values), -1, np.int64)
        out[found] = order[pos[found]]
        return out

    labels = np.arange(n, dtype=np.int64)
    r = rows_of(ids)
    c = rows_of(cluster_ids)
    ok = (r >= 0) & (c >= 0)
    labels[r[ok]] = c[ok]
    # Clusters named by something other than a corpus id (datatrove's numbers): offset by n.
    other = (r >= 0) & (c < 0)
    if other.any():
        _, dense = np.unique(cluster_ids[other], return_inverse=True)
        labels[r[other]] = n + dense
    return labels
