#!/usr/bin/env python3
"""One peer tool on one corpus, as its own process, for bench/e2e.py to time and measure.

    python bench/e2e_tools.py TOOL --corpus FILE --shards DIR --work DIR --labels OUT.npy
                              --info OUT.json [--bands B --rows R --num-perm K --threshold T]

TOOL is datasketch, datasketch-verify, rensa, rensa-verify, rensa-mp, rensa-mp-verify,
datatrove, mllib, or spark-copy (not a peer: the floor of any Spark job that writes kept/).
Writes one int64 cluster label per corpus row (row order of --corpus) to --labels, and
the tool's own phase timings and notes to --info. Everything the tool needs, reading the
corpus included, happens inside this process and its children, so the wall time and memory
of its process tree are the tool's.
neardup is not run through here: bench/e2e.py times its command line directly.

Every tool gets the same shingles as neardup and the ground truth: NFKC, lowercase,
whitespace collapsed, word 5-grams (datatrove: its own text normalization configured to
do the same; MLlib: Spark SQL has no NFKC, which ASCII text such as the generated
corpus does not need).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The corpus generator and the references live in testkit/, which the wheel does not ship.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testkit"))

import argparse
import json
import multiprocessing
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from neardup_testkit.truth import NGRAM, components

SEED = 1
BATCH_ROWS = 8192  # documents per batch handed to a peer's batch constructor


class Phases:
    """Wall seconds per named phase, in order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            # Accumulates: a phase timed once per batch reports its total.
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 3)


def word_shingles(text: str) -> list[str]:
    """Word 5-grams of the normalized text (the whole text when it has fewer than 5 words).

    Written as fast as plain Python goes, as the peers' users write it (rensa's README and
    benchmarks: `text.lower().split()`, then the n-grams joined into strings): NFKC only
    for non-ASCII text (it is the identity on ASCII, and `str.isascii` costs nothing), and
    the n-grams by `map(" ".join, zip(...))`, a third cheaper than joining list slices.
    The peers spend most of their time here, not in their MinHash code (bench/README.md).
    """
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    words = text.lower().split()
    if len(words) < NGRAM:
        return [" ".join(words)] if words else []
    # The shortest slice (words[4:]) ends the zip: len(words) - 4 n-grams.
    return list(map(" ".join, zip(*(words[i:] for i in range(NGRAM)), strict=False)))


def text_batches(corpus: str, rows: int = BATCH_ROWS) -> Iterator[list[str]]:
    """The corpus's texts in row order, `rows` at a time: a user's loop over a large file
    (the whole corpus as Python strings would double the peers' memory)."""
    for batch in pq.ParquetFile(corpus).iter_batches(batch_size=rows, columns=["text"]):
        yield batch.column(0).to_pylist()


def shingled_batches(corpus: str, phases: Phases) -> Iterator[Iterator[list[str]]]:
    """Each batch of `text_batches`, timed as the phase "read", as a lazy stream of its
    documents' shingle lists for a peer's batch constructor. Lazy on purpose: each
    document's shingles are hashed while still in cache and freed at once. A materialized
    list would let rensa hash tokens on one thread while it signs on another, but signing
    is a tenth of the work here and the list's memory traffic costs more CPU than that
    saves (bench/README.md)."""
    batches = text_batches(corpus)
    while True:
        with phases("read"):
            texts = next(batches, None)
        if texts is None:
            return
        yield map(word_shingles, texts)


def _pairs_to_labels(n: int, a: list[int], b: list[int]) -> np.ndarray:
    """Union-find over candidate pairs, as the peers' examples do (vectorized here)."""
    return components(n, np.asarray(a, np.int64), np.asarray(b, np.int64))


# --------------------------------------------------------------------------- datasketch


def _cluster(
    sigs: Sequence[Any],
    query: Callable[[], Iterable[Iterable[int]]],
    threshold: float,
    verify: bool,
    phases: Phases,
) -> tuple[np.ndarray, int, int | None]:
    """Query results (document i -> its LSH matches) -> cluster labels, with optional
    verification of each pair by the signatures' own Jaccard estimate; the peers' shared tail."""
    a: list[int] = []
    b: list[int] = []
    with phases("query"):
        for i, matches in enumerate(query()):
            for j in matches:
                if j > i:
                    a.append(i)
                    b.append(j)
    candidates = len(a)
    if verify:
        with phases("verify"):
            keep = [k for k in range(len(a)) if sigs[a[k]].jaccard(sigs[b[k]]) >= threshold]
            a = [a[k] for k in keep]
            b = [b[k] for k in keep]
    with phases("union-find"):
        labels = _pairs_to_labels(len(sigs), a, b)
    return labels, candidates, (len(a) if verify else None)


def run_datasketch(
    args: argparse.Namespace, phases: Phases, verify: bool
) -> tuple[np.ndarray, dict[str, Any]]:
    """datasketch's bulk path (`MinHash.bulk`: one set of permutations for every document)
    with a C hash function instead of its default SHA-1, as its documentation suggests for
    speed (`hashfunc`); xxhash also takes str, so the shingles need no encoding."""
    from datasketch import MinHash, MinHashLSH
    from xxhash import xxh32_intdigest

    sigs: list[Any] = []
    for tokens in shingled_batches(args.corpus, phases):
        with phases("shingle+sign"):
            sigs += MinHash.bulk(tokens, num_perm=args.num_perm, seed=SEED, hashfunc=xxh32_intdigest)
    with phases("index"):
        lsh = MinHashLSH(threshold=args.threshold, num_perm=args.num_perm, params=(args.bands, args.rows))
        with lsh.insertion_session() as session:
            for i, m in enumerate(sigs):
                session.insert(i, m, check_duplication=False)
    labels, candidates, verified = _cluster(
        sigs, lambda: (lsh.query(m) for m in sigs), args.threshold, verify, phases
    )
    info = {
        "candidate_pairs": candidates,
        "verified_pairs": verified,
        "notes": f"MinHash.bulk affine32 with xxh32 per {BATCH_ROWS} documents, "
        f"{args.num_perm} perms, LSH {args.bands}x{args.rows}; one process"
        + ("; pairs verified by signature Jaccard" if verify else "; no verification"),
    }
    return labels, info


# --------------------------------------------------------------------------- rensa


def run_rensa(
    args: argparse.Namespace, phases: Phases, verify: bool, processes: int = 1
) -> tuple[np.ndarray, dict[str, Any]]:
    """rensa's documented batch path: `RMinHash.from_token_sets` over a batch of documents
    per call, then `RMinHashLSH.insert_many` and `query_all`. With `processes` > 1 (the
    rensa-mp rows), Parquet row groups are shingled and signed in a process pool: what a
    user can add for more cores, which rensa's documentation does not describe (its own
    threads only hash the tokens, a tenth of the work here)."""
    from rensa import RMinHash, RMinHashLSH

    # RMinHashLSH requires num_perm divisible by the band count: sign with exactly b x r slots.
    num_perm = args.bands * args.rows
    sigs: list[Any] = []
    if processes > 1:
        groups = pq.ParquetFile(args.corpus).metadata.num_row_groups
        jobs = [(args.corpus, g, num_perm) for g in range(groups)]
        # fork: the pool's function lives in this script, which other start methods re-import by path.
        with phases("read+shingle+sign"), multiprocessing.get_context("fork").Pool(processes) as pool:
            for part in pool.imap(_rensa_row_group, jobs):  # imap keeps row order
                sigs += part
    else:
        for tokens in shingled_batches(args.corpus, phases):
            with phases("shingle+sign"):
                sigs += RMinHash.from_token_sets(tokens, num_perm, SEED)
    with phases("index"):
        lsh = RMinHashLSH(args.threshold, num_perm, args.bands)
        lsh.insert_many(sigs, 0)
    labels, candidates, verified = _cluster(sigs, lambda: lsh.query_all(sigs), args.threshold, verify, phases)
    how = (
        f"row groups in a pool of {processes} processes"
        if processes > 1
        else f"per {BATCH_ROWS} documents; one Python process"
    )
    info = {
        "candidate_pairs": candidates,
        "verified_pairs": verified,
        "notes": f"RMinHash.from_token_sets {how}, {num_perm} perms "
        f"(b x r: rensa needs num_perm % bands == 0), LSH {args.bands}x{args.rows}"
        + ("; pairs verified by signature Jaccard" if verify else "; no verification"),
    }
    return labels, info


def _rensa_row_group(job: tuple[str, int, int]) -> list[Any]:
    """Signatures of one Parquet row group (a pool task of run_rensa; RMinHash pickles)."""
    from rensa import RMinHash

    corpus, group, num_perm = job
    texts = pq.ParquetFile(corpus).read_row_group(group, columns=["text"]).column(0).to_pylist()
    return list(RMinHash.from_token_sets(map(word_shingles, texts), num_perm, SEED))


# --------------------------------------------------------------------------- datatrove


def _whitespace_tokenizer() -> Any:
    from datatrove.utils.word_tokenizers import WordTokenizer

    class WhitespaceTokenizer(WordTokenizer):
        """Words = whitespace-separated tokens: what neardup shingles, and no spaCy model."""

        def word_tokenize(self, text: str) -> list[str]:
            return text.split()

        def sent_tokenize(self, text: str) -> list[str]:
            return [text]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [(0, len(text))]

    return WhitespaceTokenizer("en")


def run_datatrove(args: argparse.Namespace, phases: Phases) -> tuple[np.ndarray, dict[str, Any]]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.text import TextNormConfig

    work = Path(args.work)
    shards = sorted(Path(args.shards).glob("*.parquet"))
    tasks = len(shards)  # one signing/filter task per input file; datatrove maps ranks to files
    workers = args.workers
    config = MinhashConfig(
        n_grams=NGRAM,
        num_buckets=args.bands,
        hashes_per_bucket=args.rows,
        seed=SEED,
        # datatrove's default also strips punctuation, folds digits and diacritics; this
        # matches neardup's (and the ground truth's) normalization instead.
        norm_config=TextNormConfig(
            lowercase=True,
            norm_whitespace=True,
            remove_punctuation=False,
            norm_unicode_diacritics=False,
            norm_numbers=False,
        ),
        hash_config=HashConfig(precision=64, hash_fc="xxhash"),
    )
    tokenizer = _whitespace_tokenizer()

    def reader() -> ParquetReader:
        # No metadata: the writer would otherwise take its schema from the first batch, where
        # an all-null column (target_jaccard) has type null and a later batch then fails.
        return ParquetReader(
            str(args.shards), text_key="text", id_key="id", glob_pattern="*.parquet", read_metadata=False
        )

    def execute(name: str, pipeline: list[Any], n_tasks: int, n_workers: int) -> None:
        with phases(name):
            LocalPipelineExecutor(
                pipeline=pipeline,
                tasks=n_tasks,
                workers=n_workers,
                logging_dir=str(work / "logs" / name),
                skip_completed=False,
                # fork: the tokenizer class lives in this script, which forkserver children
                # would have to re-import by path.
                start_method="fork",
            ).run()

    execute(
        "1 signatures",
        [
            reader(),
            MinhashDedupSignature(output_folder=str(work / "sigs"), config=config, language=tokenizer),
        ],
        tasks,
        workers,
    )
    execute(
        "2 buckets",
        [
            MinhashDedupBuckets(
                input_folder=str(work / "sigs"), output_folder=str(work / "buckets"), config=config
            )
        ],
        args.bands,  # one task per band is the minimum datatrove accepts
        workers,
    )
    execute(
        "3 cluster",
        [
            MinhashDedupCluster(
                input_folder=str(work / "buckets"),
                output_folder=str(work / "remove_ids"),
                config=config,
                save_cluster_id=True,
            )
        ],
        1,  # datatrove's clustering is single-task by design
        1,
    )
    execute(
        "4 filter",
        [
            reader(),
            MinhashDedupFilter(input_folder=str(work / "remove_ids")),
            ParquetWriter(output_folder=str(work / "kept")),
        ],
        tasks,
        workers,
    )
    with phases("map clusters to rows"):
        sizes = [pq.ParquetFile(s).metadata.num_rows for s in shards]
        starts = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        n = int(starts[-1])
        labels = np.arange(n, dtype=np.int64)
        for rank in range(tasks):
            f = work / "remove_ids" / f"{rank:06d}.clusters"
            if not f.exists():
                continue
            pairs = np.fromfile(f, dtype="<u4").reshape(-1, 2).astype(np.int64)
            labels[starts[rank] + pairs[:, 0]] = n + pairs[:, 1]  # cluster numbers never collide with rows
    info = {
        "notes": f"{args.bands} buckets x {args.rows} hashes (xxhash64), whitespace word tokenizer "
        f"(not spaCy), punctuation kept; {tasks} tasks/{workers} workers; no verification",
    }
    return labels, info


# --------------------------------------------------------------------------- Spark MLlib


def run_mllib(args: argparse.Namespace, phases: Phases) -> tuple[np.ndarray, dict[str, Any]]:
    from pyspark.ml.feature import HashingTF, MinHashLSH, NGram
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    with phases("session"):
        spark = (
            SparkSession.builder.master(f"local[{args.workers}]")
            .appName("bench-mllib")
            .config("spark.driver.memory", args.driver_memory)
            .config("spark.sql.shuffle.partitions", str(max(8, 4 * args.workers)))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
    with phases("features+hash+join"):
        docs = spark.read.parquet(str(args.corpus)).select("id", "text")
        words = F.split(F.trim(F.regexp_replace(F.lower("text"), r"\s+", " ")), " ")
        docs = docs.withColumn("words", words)
        grams = NGram(n=NGRAM, inputCol="words", outputCol="grams").transform(docs)
        # HashingTF (2^24 features) rather than CountVectorizer: a 5-gram vocabulary of tens
        # of millions would have to be collected and broadcast. MLlib's MinHash hashes
        # feature indices modulo a prime of ~2^31, so 2^24 indices stay distinct.
        tf = HashingTF(inputCol="grams", outputCol="features", numFeatures=1 << 24, binary=True)
        features = tf.transform(grams).select("id", "features")
        model = MinHashLSH(
            inputCol="features", outputCol="hashes", numHashTables=args.mllib_tables, seed=SEED
        ).fit(features)
        hashed = model.transform(features).cache()
        # MLlib keeps pairs with distance strictly below the threshold; J >= t is 1 - J <= 1 - t.
        joined = model.approxSimilarityJoin(hashed, hashed, 1.0 - args.threshold + 1e-9, distCol="distance")
        pairs = joined.select(F.col("datasetA.id").alias("a"), F.col("datasetB.id").alias("b")).where("a < b")
        found = pairs.toArrow()
    with phases("union-find"):
        ids = pq.read_table(args.corpus, columns=["id"]).column("id").to_numpy()
        order = np.argsort(ids)
        a = order[np.searchsorted(ids[order], found.column("a").to_numpy())]
        b = order[np.searchsorted(ids[order], found.column("b").to_numpy())]
        labels = components(len(ids), a, b)
    spark.stop()
    info = {
        "verified_pairs": found.num_rows,
        "notes": f"HashingTF 2^24 + MinHashLSH {args.mllib_tables} tables x 1 hash, approxSimilarityJoin "
        f"at distance {1 - args.threshold:.2f} (exact Jaccard of hashed features); local[{args.workers}]",
    }
    return labels, info


# --------------------------------------------------------------------------- the Spark floor


def run_spark_copy(args: argparse.Namespace, phases: Phases) -> tuple[np.ndarray, dict[str, Any]]:
    """Not a peer: what any Spark job that writes a kept corpus pays before it deduplicates
    anything. It starts a session as neardup's runs do (local[workers], the same driver
    memory), reads the corpus and writes every row back as Parquet (neardup's kept/ holds
    ~90 % of them), with Spark's default writer. Every document is its own cluster."""
    from pyspark.sql import SparkSession

    with phases("session"):
        spark = (
            SparkSession.builder.master(f"local[{args.workers}]")
            .appName("bench-spark-copy")
            .config("spark.driver.memory", args.driver_memory)
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
    with phases("read+write"):
        spark.read.parquet(str(args.corpus)).write.mode("overwrite").parquet(str(Path(args.work) / "copy"))
    spark.stop()
    rows = pq.ParquetFile(args.corpus).metadata.num_rows
    info = {"notes": f"not a peer: a local[{args.workers}] session reads the corpus, writes it as Parquet"}
    return np.arange(rows, dtype=np.int64), info


TOOLS: dict[str, Callable[[argparse.Namespace, Phases], tuple[np.ndarray, dict[str, Any]]]] = {
    "datasketch": lambda a, p: run_datasketch(a, p, verify=False),
    "datasketch-verify": lambda a, p: run_datasketch(a, p, verify=True),
    "rensa": lambda a, p: run_rensa(a, p, verify=False),
    "rensa-verify": lambda a, p: run_rensa(a, p, verify=True),
    "rensa-mp": lambda a, p: run_rensa(a, p, verify=False, processes=a.workers),
    "rensa-mp-verify": lambda a, p: run_rensa(a, p, verify=True, processes=a.workers),
    "datatrove": run_datatrove,
    "mllib": run_mllib,
    "spark-copy": run_spark_copy,
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tool", choices=sorted(TOOLS))
    p.add_argument("--corpus", required=True)
    p.add_argument("--shards", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--info", required=True)
    p.add_argument("--bands", type=int, required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mllib-tables", type=int, default=16)
    p.add_argument("--driver-memory", default="4g")
    args = p.parse_args()
    phases = Phases()
    labels, info = TOOLS[args.tool](args, phases)
    np.save(args.labels, labels)
    Path(args.info).write_text(json.dumps({**info, "phases": phases.seconds}, indent=2) + "\n")


if __name__ == "__main__":
    main()
