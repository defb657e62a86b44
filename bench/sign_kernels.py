#!/usr/bin/env python3
"""Signing cost per document, from raw text to signature, on one core.

    python bench/sign_kernels.py [--docs 2000] [--num-perm 128] [--mean-chars 2000]

Prints microseconds per document for neardup's classic and OPH kernels (normalize +
shingle + sign), for exact verification's scoring (normalize + shingle + the Jaccard of
each document with its group's head, in groups of two), and, when they are installed
(`pip install -e '.[bench]'`), the same measure for datasketch and rensa on the same texts.
Figures, not assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator and the references live in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import os
import time
from collections.abc import Callable

import pyarrow as pa

from e2e_tools import word_shingles
from neardup import columns as C
from neardup.kernels.minhash import signatures
from neardup.kernels.scoring import score_groups
from neardup.kernels.signatures import SignParams
from neardup.kernels.textnorm import normalize
from neardup_testkit.synth import CorpusSpec, generate


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        # CPU time of the process (robust to a busy machine), which also counts the helper
        # thread rensa signs on when given a list.
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--mean-chars", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    texts = generate(CorpusSpec(num_docs=args.docs, seed=3, mean_chars=args.mean_chars)).column("text")
    n, k = len(texts), args.num_perm
    mean_len = sum(len(t) for t in texts.to_pylist()) / n
    rows = []
    for method in ("classic", "oph"):

        def run(method: str = method) -> None:
            norm = normalize(texts)
            signatures(norm, unit="word", ngram=5, char_ngram=5, num_perm=k, seed=1, method=method)

        run()  # JIT warm-up (compiles or loads the cache)
        rows.append((f"neardup {method}", _best_of(run, args.repeat)))

    # What exact verification computes per document instead (kernels/scoring.py): each text
    # normalized and shingled, and scored against its group's head; here groups of two.
    ids = pa.array(range(n), pa.int64())
    heads = pa.array([i - i % 2 for i in range(n)], pa.int64())
    groups = pa.record_batch([heads, ids, texts.combine_chunks()], names=[C.GROUP, C.DOC_ID, C.TEXT])
    params = SignParams(True, False, "word", 5, 5, k, 1, "oph", 1, 1)

    def scoring() -> None:
        for _ in score_groups([groups], params, 0.0):
            pass

    scoring()
    rows.append(("neardup exact scoring", _best_of(scoring, args.repeat)))

    py_texts = texts.to_pylist()

    # The peers as bench/e2e_tools.py runs them (their batch constructors, shingling included,
    # as for neardup), with rensa's Rayon pool at one thread: one core's worth of work.
    os.environ["RAYON_NUM_THREADS"] = "1"
    try:
        from datasketch import MinHash
        from xxhash import xxh32_intdigest

        def ds() -> None:
            MinHash.bulk(map(word_shingles, py_texts), num_perm=k, seed=1, hashfunc=xxh32_intdigest)

        rows.append(("datasketch MinHash", _best_of(ds, 1)))
    except ImportError:
        print("datasketch not installed: pip install -e '.[bench]'")
    try:
        from rensa import RMinHash

        def rs() -> None:
            RMinHash.from_token_sets(map(word_shingles, py_texts), k, 1)

        def rs_sign_only(tokens: list[list[str]]) -> None:
            RMinHash.from_token_sets(tokens, k, 1)

        rows.append(("rensa RMinHash", _best_of(rs, args.repeat)))
        tokens = [word_shingles(t) for t in py_texts]
        rows.append(("  of which rensa alone", _best_of(lambda: rs_sign_only(tokens), args.repeat)))
    except ImportError:
        print("rensa not installed: pip install -e '.[bench]'")

    print(f"{n} documents, mean {mean_len:,.0f} characters, {k} permutations, process CPU time")
    print(f"{'signer':<22} {'us/doc':>9}")
    for name, secs in rows:
        print(f"{name:<22} {secs / n * 1e6:9.1f}")


if __name__ == "__main__":
    main()
