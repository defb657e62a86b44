#!/usr/bin/env python3
"""What decontamination costs: the per-batch kernel on one core, the reference's size once
broadcast, and optionally the whole command.

    python -m bench decontaminate [--docs 4000] [--ref-items 2000] [--ref-chars 1800]
                                  [--e2e-docs 100000]

Kernel: microseconds per corpus document (2 KB on average) for n-gram matching alone,
near-duplicate matching alone and both, next to dedup's signing pass (`sign_batch`) on
the same batch; the reference's build time and its broadcast bytes against its text.
With --e2e-docs, `neardup decontaminate` in local[2] on a generated corpus of that many
documents against the same reference, then `neardup dedup` on that corpus, with their
seconds per stage. Figures, not assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator lives in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import dataclasses
import json
import os
import subprocess
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

from neardup import columns as C
from neardup import config
from neardup.kernels.contamination import DeconParams, build_reference, decontaminate_batch, reference_bytes
from neardup.kernels.signatures import sign_batch
from neardup.stages.sign import sign_params
from neardup_testkit.synth import CorpusSpec, generate
from sign_kernels import _best_of


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=4000)
    p.add_argument("--ref-items", type=int, default=2000)
    p.add_argument("--ref-chars", type=int, default=1800)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--e2e-docs", type=int, default=0)
    args = p.parse_args()
    sp = sign_params(config.load())
    both = DeconParams(sp, ngram=13, threshold=0.8, verify="exact")
    ref_table = generate(
        CorpusSpec(num_docs=args.ref_items, seed=77, mean_chars=args.ref_chars, dup_fraction=0.0)
    )
    ref_texts = ref_table.column("text").combine_chunks()
    text_bytes = sum(len(t.encode()) for t in ref_texts.to_pylist())
    start = time.perf_counter()
    ref = build_reference(ref_texts, both)
    built = time.perf_counter() - start
    payload = reference_bytes(ref)
    bits = ref.gram_filter[0].nbytes
    print(
        f"reference: {args.ref_items:,} items, {text_bytes / 2**20:.1f} MiB of text, {ref.ngrams:,} "
        f"n-gram entries; built in {built:.2f} s; broadcast {len(payload) / 2**20:.1f} MiB "
        f"({len(payload) / text_bytes:.2f} x the text), {(len(payload) + bits) / text_bytes:.2f} x "
        "with the lookup filter each worker adds"
    )
    corpus = generate(CorpusSpec(num_docs=args.docs, seed=5, mean_chars=2000))
    batch = pa.record_batch(
        {
            C.DOC_ID: corpus.column("id").combine_chunks(),
            C.TEXT: corpus.column("text").combine_chunks(),
            C.RANK: pa.nulls(args.docs, pa.int64()),
        }
    )
    modes = {
        "dedup's signing pass (sign_batch)": lambda: sign_batch(batch, sp, False),
        "n-grams only": lambda: decontaminate_batch(batch, ref, dataclasses.replace(both, threshold=None)),
        "near-duplicates only": lambda: decontaminate_batch(batch, ref, dataclasses.replace(both, ngram=0)),
        "both (the default)": lambda: decontaminate_batch(batch, ref, both),
    }
    print(f"corpus batch: {args.docs:,} documents, {batch.column(C.TEXT).nbytes / args.docs:,.0f} B each")
    for name, fn in modes.items():
        fn()  # JIT warm-up (compiles or loads the cache)
        secs = _best_of(fn, args.repeat)
        print(f"  {name:<36} {1e6 * secs / args.docs:7.1f} us per document")
    if args.e2e_docs:
        _e2e(args.e2e_docs, ref_table)


def _e2e(docs: int, ref_table: pa.Table) -> None:
    """`neardup decontaminate` and then, on the same corpus, `neardup dedup`: the same
    machine at nearly the same moment, for a ratio that a busy machine affects less."""
    with tempfile.TemporaryDirectory(prefix="neardup-decon-bench-") as tmp:
        root = Path(tmp)
        corpus = root / "corpus.parquet"
        pq.write_table(generate(CorpusSpec(num_docs=docs, seed=6, mean_chars=2000)), corpus)
        ref = pa.table({"id": ref_table.column("id"), "text": ref_table.column("text")})
        pq.write_table(ref, root / "evals.parquet")
        for command, more in (("decontaminate", ["--reference", str(root / "evals.parquet")]), ("dedup", [])):
            cmd = [sys.executable, "-m", "neardup", command, "--input", str(corpus), *more]
            cmd += ["--output", str(root / command), "--master", "local[2]", "--set", "report.html=false"]
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
            wall = time.perf_counter() - start
            if proc.returncode:
                sys.exit(proc.stderr[-3000:])
            report = json.loads((root / command / "report.json").read_text())
            stages = ", ".join(f"{k} {v:.1f}" for k, v in report["seconds"].items() if k != "total")
            print(
                f"neardup {command}, local[2], {docs:,} documents: {wall:.1f} s wall "
                f"({docs / wall:,.0f} docs/s); stages (s): {stages}"
            )


if __name__ == "__main__":
    main()
