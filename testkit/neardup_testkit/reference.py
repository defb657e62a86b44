"""Brute-force reference results that the pipeline's output is checked against.

Independent of neardup on purpose: it imports nothing from the package and
never uses MinHash signatures, LSH or Arrow buffers, so a bug in a kernel
cannot be reproduced here and cancel out. `shingles` and `jaccard` are plain
Python sets; `similar_pairs` is exact too (integer codes of the shingles, a
prefix filter, exact intersections) and is tested against all pairs of
`shingles` + `jaccard`. Semantics follow docs/design.md and conf/default.yaml:

- normalize: Unicode NFKC, optionally lowercase, optionally replace Unicode
  punctuation and symbols (categories P* and S*) by spaces, then collapse
  whitespace runs (``str.split()``) into single spaces and trim;
- shingles: word n-grams of the normalized text; a text with fewer than n
  words gets character n-grams instead (size ``char_ngram``), a normalized
  text shorter than that is one shingle, an empty one has none;
- Jaccard of two shingle sets, exact; two empty sets have similarity 0: a
  document with no shingles is similar to nothing.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import chain, combinations
from typing import Any

import numpy as np

Shingle = tuple[str, ...] | str
Pair = tuple[Any, Any]


def normalize(text: str, lowercase: bool = True, strip_punctuation: bool = False) -> str:
    text = unicodedata.normalize("NFKC", text)
    if lowercase:
        text = text.lower()
    if strip_punctuation:
        text = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in text)
    return " ".join(text.split())


def shingles(
    text: str,
    unit: str = "word",
    ngram: int = 5,
    char_ngram: int = 5,
    lowercase: bool = True,
    strip_punctuation: bool = False,
) -> frozenset[Shingle]:
    """Word n-grams as tuples of words, character n-grams as strings."""
    if unit not in ("word", "char"):
        raise ValueError(f"unit must be 'word' or 'char', not {unit!r}")
    norm = normalize(text, lowercase=lowercase, strip_punctuation=strip_punctuation)
    if not norm:
        return frozenset()
    size = ngram
    if unit == "word":
        words = norm.split(" ")
        if len(words) >= ngram:
            # zip over shifted views builds the n-gram tuples in C.
            return frozenset(zip(*(words[i:] for i in range(ngram)), strict=False))
        size = char_ngram  # too few words: fall back to characters
    if len(norm) <= size:
        return frozenset([norm])
    return frozenset(norm[i : i + size] for i in range(len(norm) - size + 1))


def jaccard(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def _ordered(a: Any, b: Any) -> Pair:
    return (a, b) if a < b else (b, a)


def _check_ids(ids: Sequence[Any], texts: Sequence[str]) -> None:
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
    if len(set(ids)) != len(ids):
        raise ValueError("ids are not unique")


_ROW_HASH = np.random.Generator(np.random.PCG64(20240531)).integers(1, 2**63, size=64, dtype=np.int64).astype(
    np.uint64
) | np.uint64(1)


def _dense_rows_sorted(rows: np.ndarray) -> np.ndarray:
    """Dense int codes of the rows of a 2-D array of ints >= 0 by a lexicographic sort.

    Slow (numpy's lexsort) but needs no hashing: the fallback of `_dense_rows`.
    """
    base = int(rows.max()) + 1
    per_key = 1
    while base ** (per_key + 1) < 2**62:
        per_key += 1
    keys = []
    for first in range(0, rows.shape[1], per_key):
        key = np.zeros(len(rows), dtype=np.int64)
        for col in range(first, min(first + per_key, rows.shape[1])):
            key = key * base + rows[:, col]
        keys.append(key)
    order = np.lexsort(keys[::-1])
    new_run = np.zeros(len(rows), dtype=bool)
    new_run[0] = True
    for key in keys:
        k = key[order]
        new_run[1:] |= k[1:] != k[:-1]
    code = np.empty(len(rows), dtype=np.int64)
    code[order] = np.cumsum(new_run) - 1
    return code


def _dense_rows(rows: np.ndarray) -> np.ndarray:
    """Dense int codes of the rows of a 2-D int array: equal rows <-> equal codes.

    Exact. Rows are grouped by a 64-bit hash (one argsort, ~10x faster than a
    lexicographic sort), then every pair of adjacent rows in a hash group is
    compared column by column; on any collision of different rows the exact
    sort-based coding is used instead.
    """
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    if rows.shape[1] > len(_ROW_HASH):
        return _dense_rows_sorted(rows)
    h = np.zeros(len(rows), dtype=np.uint64)
    for col in range(rows.shape[1]):
        h += rows[:, col].astype(np.uint64) * _ROW_HASH[col]
    order = np.argsort(h)
    hs = h[order]
    same = hs[1:] == hs[:-1]
    for col in range(rows.shape[1]):
        c = rows[order, col]
        if np.any(same & (c[1:] != c[:-1])):
            return _dense_rows_sorted(rows)
    code = np.empty(len(rows), dtype=np.int64)
    code[order] = np.cumsum(np.r_[True, ~same]) - 1
    return code


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    # np.sort + adjacent compare: numpy 2's np.unique hashes and is far slower on int64.
    v = np.sort(values)
    return v[np.r_[True, v[1:] != v[:-1]]] if len(v) else v


def _shingle_table(
    texts: Sequence[str],
    unit: str = "word",
    ngram: int = 5,
    char_ngram: int = 5,
    lowercase: bool = True,
    strip_punctuation: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The shingles of every text as (doc, code) int arrays, sorted, without repeats.

    Same rules as `shingles`, with each distinct shingle as an int code (two
    shingles of any texts get the same code iff they are equal), computed on
    int arrays instead of Python tuples: ~10x faster on thousands of
    documents. The tests check it against `shingles` on random texts.
    """
    if unit not in ("word", "char"):
        raise ValueError(f"unit must be 'word' or 'char', not {unit!r}")
    norms = [normalize(t, lowercase=lowercase, strip_punctuation=strip_punctuation) for t in texts]
    size = char_ngram if unit == "word" else ngram
    word_docs: list[int] = []
    word_lists: list[list[str]] = []
    char_docs: list[int] = []
    char_rows: list[np.ndarray] = []
    for doc, norm in enumerate(norms):
        if not norm:
            continue
        if unit == "word":
            words = norm.split(" ")
            if len(words) >= ngram:
                word_docs.append(doc)
                word_lists.append(words)
                continue
        # Code points + 1; a text shorter than the n-gram is one shingle,
        # padded with 0 (no code point) so it equals no real n-gram.
        points = np.frombuffer(norm.encode("utf-32-le"), dtype=np.uint32).astype(np.int64) + 1
        if len(points) < size:
            points = np.concatenate([points, np.zeros(size - len(points), dtype=np.int64)])
        char_docs.append(doc)
        char_rows.append(np.lib.stride_tricks.sliding_window_view(points, size))

    vocab = dict.fromkeys(chain.from_iterable(word_lists))
    word_id = dict(zip(vocab, range(len(vocab)), strict=True))
    word_rows = [
        np.lib.stride_tricks.sliding_window_view(
            np.fromiter(map(word_id.__getitem__, w), np.int64, len(w)), ngram
        )
        for w in word_lists
    ]

    docs: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    offset = 0  # character codes follow word codes: the two kinds never compare equal
    for owners, rows in ((word_docs, word_rows), (char_docs, char_rows)):
        if not rows:
            continue
        dense = _dense_rows(np.concatenate(rows)) + offset
        offset = int(dense.max()) + 1
        docs.append(np.repeat(np.asarray(owners, dtype=np.int64), [len(r) for r in rows]))
        codes.append(dense)
    if not codes:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    combined = _sorted_unique(np.concatenate(docs) * offset + np.concatenate(codes))
    return combined // offset, combined % offset


def similar_pairs(
    ids: Sequence[Any], texts: Sequence[str], min_jaccard: float, **shingle_kw: Any
) -> dict[Pair, float]:
    """Every pair (id_a < id_b) whose exact shingle Jaccard is >= min_jaccard.

    Exact, but not all-pairs: prefix filtering (Chaudhuri et al. 2006; Bayardo
    et al. 2007, "AllPairs"). Order all shingles globally, rarest first; if
    J(A, B) >= t then |A ∩ B| >= ceil(t |A|), and two sets sharing at least
    alpha_A and alpha_B elements must share one among the first
    |A| - alpha_A + 1 of A and the first |B| - alpha_B + 1 of B. So only pairs
    whose prefixes meet are candidates, and each candidate's Jaccard is then
    computed exactly from the two sets. Indexing the rarest shingles keeps
    posting lists short even where every document shares common shingles
    (character n-grams, boilerplate), where a plain inverted index over all
    shingles would degrade to all pairs.
    """
    if not 0.0 < min_jaccard <= 1.0:
        raise ValueError("min_jaccard must be in (0, 1]: pairs sharing nothing are never listed")
    _check_ids(ids, texts)
    doc, code = _shingle_table(texts, **shingle_kw)
    if len(doc) == 0:
        return {}
    sizes = np.bincount(doc, minlength=len(texts))
    starts = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    df = np.bincount(code)

    # Each document's shingles rarest first (ties by code: any fixed total
    # order will do), then keep its prefix. Orders are taken by sorting packed
    # int64 keys, much faster than lexsort. The 1e-9 errs on the side of a
    # longer prefix when t*|A| is an integer in exact arithmetic but not in
    # floating point.
    n_docs, n_codes, max_df = len(texts), len(df), int(df.max())
    if n_docs * (max_df + 1) * n_codes >= 2**62:
        raise ValueError("corpus too large for the reference implementation")
    rank = np.sort((doc * (max_df + 1) + df[code]) * n_codes + code)
    ranked_code = rank % n_codes
    ranked_doc = rank // ((max_df + 1) * n_codes)
    alpha = np.maximum(1, np.ceil(min_jaccard * sizes - 1e-9).astype(np.int64))
    prefix_len = sizes - alpha + 1
    keep = np.arange(len(rank)) - starts[ranked_doc] < prefix_len[ranked_doc]
    postings = np.sort(ranked_code[keep] * n_docs + ranked_doc[keep])
    token, owner = postings // n_docs, postings % n_docs
    run_start = np.flatnonzero(np.r_[True, token[1:] != token[:-1]])
    run_end = np.r_[run_start[1:], len(token)]
    shared = (run_end - run_start) > 1  # most prefix shingles are in one document: skip in bulk
    candidates: set[tuple[int, int]] = set()
    for start, end in zip(run_start[shared].tolist(), run_end[shared].tolist(), strict=True):
        candidates.update(combinations(owner[start:end].tolist(), 2))

    result: dict[Pair, float] = {}
    for i, j in candidates:
        a, b = code[starts[i] : starts[i + 1]], code[starts[j] : starts[j + 1]]
        inter = len(np.intersect1d(a, b, assume_unique=True))
        similarity = inter / (len(a) + len(b) - inter)
        if similarity >= min_jaccard:
            result[_ordered(ids[i], ids[j])] = similarity
    return result


def exact_pairs(
    ids: Sequence[Any], texts: Sequence[str], lowercase: bool = True, strip_punctuation: bool = False
) -> set[Pair]:
    """Pairs (id_a < id_b) whose normalized texts are equal and not empty.

    Empty normalized texts are left out: they have no shingles, and the
    pipeline may reject them rather than call them duplicates of each other.
    """
    _check_ids(ids, texts)
    groups: dict[str, list[Any]] = defaultdict(list)
    for i, t in zip(ids, texts, strict=True):
        norm = normalize(t, lowercase=lowercase, strip_punctuation=strip_punctuation)
        if norm:
            groups[norm].append(i)
    return {_ordered(a, b) for g in groups.values() for a, b in combinations(g, 2)}


def _bucket_edges(buckets: Iterable[Sequence[Any]], cap: int) -> tuple[set[Pair], set[Pair]]:
    """(every pair of a bucket of up to `cap` documents, every star edge of a larger one)."""
    pairs: set[Pair] = set()
    star_edges: set[Pair] = set()
    for bucket in buckets:
        members = sorted(bucket)
        if len(members) <= cap:
            pairs.update(combinations(members, 2))
        else:
            star_edges.update((members[0], m) for m in members[1:])
    return pairs, star_edges


def lsh_candidates(buckets: Iterable[Sequence[Any]], cap: int) -> set[Pair]:
    """The candidate pairs of LSH buckets (each a list of ids), by docs/design.md's rule:
    every pair of a bucket of up to `cap` documents; from a larger bucket, a star edge
    (its smallest id, member) for each member, unless the two are such a pair already. Of a
    document's star edges, the one to its smallest centre c1 is kept; each further centre c
    is linked by the one edge (c, w), w the smallest document with the same c1 and c."""
    pairs, star_edges = _bucket_edges(buckets, cap)
    centres: dict[Any, list[Any]] = defaultdict(list)
    for c, doc in star_edges - pairs:
        centres[doc].append(c)
    edges = set(pairs)
    witness: dict[Pair, Any] = {}
    for doc, mine in centres.items():
        first = min(mine)
        edges.add((first, doc))
        for c in mine:
            if c != first:
                witness[(first, c)] = min(witness.get((first, c), doc), doc)
    edges.update((c, w) for (_, c), w in witness.items())
    return edges


def star_candidates(buckets: Iterable[Sequence[Any]], cap: int) -> set[Pair]:
    """Every pair of a bucket of up to `cap` documents, and every star edge of a larger one:
    the candidates before `lsh_candidates` drops a document's further star edges."""
    pairs, star_edges = _bucket_edges(buckets, cap)
    return pairs | star_edges


def star_groups(buckets: Iterable[Sequence[Any]], cap: int) -> set[Pair]:
    """The star edges (centre, member) of the buckets larger than `cap` that are not also a
    small bucket's pair: the star groups that stages/stars.py resolves."""
    pairs, star_edges = _bucket_edges(buckets, cap)
    return star_edges - pairs


def bfs_components(nodes: Iterable[Any], edges: Iterable[Pair]) -> dict[Any, Any]:
    """Each node (including edge endpoints missing from `nodes`) -> smallest node of its component."""
    adjacency: dict[Any, list[Any]] = {n: [] for n in nodes}
    for a, b in edges:
        adjacency.setdefault(a, []).append(b)
        adjacency.setdefault(b, []).append(a)
    component: dict[Any, Any] = {}
    for start in adjacency:
        if start in component:
            continue
        members = [start]
        seen = {start}
        queue = deque([start])
        while queue:
            for nxt in adjacency[queue.popleft()]:
                if nxt not in seen:
                    seen.add(nxt)
                    members.append(nxt)
                    queue.append(nxt)
        root = min(members)
        for m in members:
            component[m] = root
    return component


def reference_clusters(
    ids: Sequence[Any], texts: Sequence[str], min_jaccard: float, **shingle_kw: Any
) -> dict[Any, Any]:
    """id -> smallest id of its cluster, where clusters are the connected
    components of exact-duplicate pairs plus similar pairs (J >= min_jaccard)."""
    norm_kw = {k: v for k, v in shingle_kw.items() if k in ("lowercase", "strip_punctuation")}
    edges = set(similar_pairs(ids, texts, min_jaccard, **shingle_kw))
    edges |= exact_pairs(ids, texts, **norm_kw)
    return bfs_components(ids, edges)


def cluster_pairs(assignment: Mapping[Any, Hashable]) -> set[Pair]:
    """All pairs (a < b) of items assigned to the same cluster."""
    groups: dict[Hashable, list[Any]] = defaultdict(list)
    for item, cluster in assignment.items():
        groups[cluster].append(item)
    return {_ordered(a, b) for g in groups.values() for a, b in combinations(g, 2)}


def pair_scores(
    predicted_clusters: Mapping[Any, Hashable], true_pairs: Iterable[Pair]
) -> tuple[float, float, float]:
    """Pairwise (precision, recall, F1) of a clustering against true pairs.

    Predicted pairs are all pairs within a predicted cluster. With no
    predicted pairs precision is 1; with no true pairs recall is 1 (nothing to
    find, nothing wrongly found).
    """
    predicted = cluster_pairs(predicted_clusters)
    truth = {_ordered(a, b) for a, b in true_pairs}
    hits = len(predicted & truth)
    precision = hits / len(predicted) if predicted else 1.0
    recall = hits / len(truth) if truth else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def guarded_clusters(
    ids: Sequence[Any],
    texts: Sequence[str],
    min_jaccard: float,
    guard: float | None,
    max_rounds: int = 20,
    rank: Callable[[Any], Any] | None = None,
    **shingle_kw: Any,
) -> dict[Any, tuple[Any, float | None]]:
    """id -> (kept id, similarity to it) as docs/design.md defines the job's result, over
    the exact similar pairs (no LSH), in plain Python.

    Exact groups (equal non-empty normalized text) are represented by their best member;
    representatives joined by pairs at >= min_jaccard form components; each keeps its
    best member. Best: the smallest `rank(id)`; by default survivor.policy longest (most
    characters of original text, then smallest id). With `guard`, each removed
    representative below `guard` against its kept one is split off; the split ones are
    re-clustered over their own similar pairs, round after round, and after `max_rounds`
    any still failing is kept alone. Copies take their representative's kept id, and its
    similarity (1.0 for copies of the kept one); kept ones have None.
    """
    _check_ids(ids, texts)
    norm_kw = {k: v for k, v in shingle_kw.items() if k in ("lowercase", "strip_punctuation")}
    length = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    order = rank or (lambda i: (-length[i], i))
    rep = _exact_representatives(ids, texts, order, norm_kw)
    reps = sorted(set(rep.values()))
    text_of = dict(zip(ids, texts, strict=True))
    sets = {r: shingles(text_of[r], **shingle_kw) for r in reps}
    edges = similar_pairs(reps, [text_of[r] for r in reps], min_jaccard, **shingle_kw)
    result = _guard_rounds(reps, list(edges), sets, order, guard, max_rounds, frozenset(), min_jaccard)
    return _with_copies(ids, rep, result)


def statuses(
    ids: Sequence[Any],
    texts: Sequence[str],
    result: Mapping[Any, tuple[Any, float | None]],
    rank: Callable[[Any], Any] | None = None,
    **norm_kw: Any,
) -> dict[Any, str]:
    """id -> its status in clusters/ for `result` (`guarded_clusters`' with the same `rank`):
    a kept document is `kept` if any is removed in its favour, else `unique`; a removed one is
    `exact_duplicate` if a better member of its exact group (equal non-empty normalized
    text) represents it, else `near_duplicate`."""
    length = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    rep = _exact_representatives(ids, texts, rank or (lambda i: (-length[i], i)), norm_kw)
    favoured = {kept for i, (kept, _) in result.items() if kept != i}
    return {
        i: ("kept" if i in favoured else "unique")
        if kept == i
        else ("exact_duplicate" if rep[i] != i else "near_duplicate")
        for i, (kept, _) in result.items()
    }


def incremental_clusters(
    batch_ids: Sequence[Any],
    batch_texts: Sequence[str],
    index_ids: Sequence[Any],
    index_texts: Sequence[str],
    min_jaccard: float,
    guard: float | None,
    max_rounds: int = 20,
    rank: Callable[[Any], Any] | None = None,
    **shingle_kw: Any,
) -> dict[Any, tuple[Any, float | None]]:
    """batch id -> (kept id, similarity to it) as docs/design.md defines `dedup --against`:
    the batch deduplicated within itself and against indexed documents, in plain Python.

    As `guarded_clusters` over the batch's exact groups' representatives and the indexed
    documents, with three differences: pairs of two indexed documents are not edges (the
    index keeps no texts to compare them by, and they are already deduplicated); indexed
    documents come first in every cluster (then by id: they have no policy column), before
    the batch's best by `rank` (default: longest); and an indexed document is never removed:
    one that is not its cluster's kept document is split off like a document below the guard,
    and re-clustered with them (also with the guard off).
    """
    _check_ids(batch_ids, batch_texts)
    _check_ids(index_ids, index_texts)
    norm_kw = {k: v for k, v in shingle_kw.items() if k in ("lowercase", "strip_punctuation")}
    length = {i: len(t) for i, t in zip(batch_ids, batch_texts, strict=True)}
    batch_order = rank or (lambda i: (-length[i], i))
    indexed = frozenset(index_ids)
    if indexed & set(batch_ids):
        raise ValueError("batch and index ids must differ")

    def order(i: Any) -> tuple[int, Any]:
        return (0, i) if i in indexed else (1, batch_order(i))

    rep = _exact_representatives(batch_ids, batch_texts, batch_order, norm_kw)
    text_of = {
        **dict(zip(batch_ids, batch_texts, strict=True)),
        **dict(zip(index_ids, index_texts, strict=True)),
    }
    nodes = sorted(set(rep.values())) + sorted(indexed)
    sets = {n: shingles(text_of[n], **shingle_kw) for n in nodes}
    pairs = similar_pairs(nodes, [text_of[n] for n in nodes], min_jaccard, **shingle_kw)
    edges = [(a, b) for a, b in pairs if not (a in indexed and b in indexed)]
    result = _guard_rounds(nodes, edges, sets, order, guard, max_rounds, indexed, min_jaccard)
    return _with_copies(batch_ids, rep, result)


def _exact_representatives(
    ids: Sequence[Any], texts: Sequence[str], order: Callable[[Any], Any], norm_kw: Mapping[str, Any]
) -> dict[Any, Any]:
    """id -> the best member (smallest `order`) of its exact group; itself if its text is empty."""
    rep: dict[Any, Any] = {}
    groups: dict[str, list[Any]] = defaultdict(list)
    for i, t in zip(ids, texts, strict=True):
        norm = normalize(t, **norm_kw)
        if norm:
            groups[norm].append(i)
        else:
            rep[i] = i
    for members in groups.values():
        best = min(members, key=order)
        for m in members:
            rep[m] = best
    return rep


def _guard_rounds(
    nodes: Sequence[Any],
    edges: Sequence[Pair],
    sets: Mapping[Any, frozenset[Shingle]],
    order: Callable[[Any], Any],
    guard: float | None,
    max_rounds: int,
    pinned: frozenset[Any],
    nearest_below: float,
) -> dict[Any, tuple[Any, float | None]]:
    """node -> (kept node, similarity): components of `edges`, the best node (smallest
    `order`) kept in each; members below `guard` against it, and `pinned` members (never
    removed), re-clustered among themselves round after round. With `guard`, a cluster the
    rounds split into 2 to NEAREST_UP_TO kept nodes then sends each of its removed nodes below
    `nearest_below` against its kept one to the kept one it is most similar to, by
    NEAREST_MARGIN more than to its own (ties: its own, then the smallest id)."""
    adjacency: dict[Any, set[Any]] = defaultdict(set)
    for a, b in edges:
        adjacency[a].add(b)
        adjacency[b].add(a)
    result: dict[Any, tuple[Any, float | None]] = {}
    pending = [c for c in _groups(bfs_components(nodes, edges)) if len(c) > 1]
    clusters, split = list(pending), False
    for n in nodes:
        if not adjacency[n]:
            result[n] = (n, None)
    rounds = 0
    while pending:
        rounds += 1
        failing: list[Any] = []
        for cluster in pending:
            kept = min(cluster, key=order)
            result[kept] = (kept, None)
            for m in cluster:
                if m == kept:
                    continue
                s = jaccard(sets[m], sets[kept])
                if m not in pinned and (guard is None or s >= guard):
                    result[m] = (kept, s)
                else:
                    failing.append(m)
        if not failing:
            break
        split = True
        if rounds >= max_rounds:
            for m in failing:
                result[m] = (m, None)
            break
        inside = set(failing)
        own = [(a, b) for a, b in edges if a in inside and b in inside]
        regrouped = _groups(bfs_components(failing, own))
        pending = [c for c in regrouped if len(c) > 1]
        for c in regrouped:
            if len(c) == 1:
                result[c[0]] = (c[0], None)
    if guard is not None and split:
        _to_nearest(clusters, sets, result, nearest_below)
    return result


NEAREST_UP_TO = 32  # docs/design.md: the guard's nearest kept document
NEAREST_MARGIN = 0.05  # ... and how much more similar it must be than the current one


def _to_nearest(
    clusters: Sequence[Sequence[Any]],
    sets: Mapping[Any, frozenset[Shingle]],
    result: dict[Any, tuple[Any, float | None]],
    below: float,
) -> None:
    for cluster in clusters:
        kept = sorted(m for m in cluster if result[m][0] == m)
        if not 1 < len(kept) <= NEAREST_UP_TO:
            continue
        for m in cluster:
            own, similarity = result[m]
            if own == m:
                continue
            assert similarity is not None
            if similarity >= below:
                continue
            options = [(-(similarity + NEAREST_MARGIN), False, own, similarity)]
            for k in kept:
                if k != own:
                    s = jaccard(sets[m], sets[k])
                    options.append((-s, True, k, s))
            _, _, best, score = min(options)
            result[m] = (best, score)


def _with_copies(
    ids: Sequence[Any], rep: Mapping[Any, Any], result: Mapping[Any, tuple[Any, float | None]]
) -> dict[Any, tuple[Any, float | None]]:
    """Every id: its representative's kept id and similarity; 1.0 for a copy of the kept one."""
    out: dict[Any, tuple[Any, float | None]] = {}
    for i in ids:
        kept, similarity = result[rep[i]]
        out[i] = (kept, 1.0 if i != rep[i] and kept == rep[i] else similarity)
    return out


def _groups(component: Mapping[Any, Any]) -> list[list[Any]]:
    members: dict[Any, list[Any]] = defaultdict(list)
    for node, root in component.items():
        members[root].append(node)
    return [sorted(m) for m in members.values()]


def band_key_bytes(keys: Sequence[int]) -> bytes:
    """A `_bands` value as the job's signing stage writes it: each band key as 8 bytes,
    little-endian, two's complement, in band order."""
    return b"".join(int(k).to_bytes(8, "little", signed=True) for k in keys)
