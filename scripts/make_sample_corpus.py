#!/usr/bin/env python3
"""Write a synthetic corpus with planted near-duplicates (neardup_testkit.synth) to a file.

The shipped sample is exactly:

    python scripts/make_sample_corpus.py --num-docs 3000 --seed 7 --out data/sample/corpus.jsonl.gz

Output format from the file name: .jsonl.gz (JSON Lines, gzip, byte-identical
for the same arguments) or .parquet. Prints a one-line summary to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lib"))  # runnable from a checkout without installing
sys.path.insert(0, str(ROOT / "testkit"))  # the generator: test support the wheel does not ship

from neardup_testkit.synth import CorpusSpec, generate, write_jsonl_gz, write_parquet  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-docs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mean-chars",
        type=int,
        default=1200,
        help="mean document length in characters (default 1200: a small sample)",
    )
    parser.add_argument("--dup-fraction", type=float, default=0.3)
    parser.add_argument("--max-cluster-size", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True, help="*.jsonl.gz or *.parquet")
    args = parser.parse_args(argv)

    name = args.out.name
    if not (name.endswith(".jsonl.gz") or name.endswith(".parquet")):
        parser.error(f"--out {args.out}: the name must end in .jsonl.gz or .parquet")
    try:
        spec = CorpusSpec(
            num_docs=args.num_docs,
            seed=args.seed,
            mean_chars=args.mean_chars,
            dup_fraction=args.dup_fraction,
            max_cluster_size=args.max_cluster_size,
        )
    except ValueError as e:
        parser.error(str(e))

    started = time.perf_counter()
    table = generate(spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if name.endswith(".parquet"):
        write_parquet(table, args.out)
    else:
        write_jsonl_gz(table, args.out)
    clusters = table.column("cluster").to_numpy()
    planted = int((clusters >= 0).sum())
    print(
        f"{args.out}: {table.num_rows} documents, {len(set(clusters[clusters >= 0].tolist()))} "
        f"planted clusters ({planted} documents), {args.out.stat().st_size} bytes, "
        f"{time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
