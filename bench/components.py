"""Connected components alone, backend against backend: which one `components.backend: auto`
should pick above the driver's bound.

    python -m bench components [--edges 1000000,10000000] [--masters local,standalone]
                               [--backends driver,builtin,graphframes,graphx]

The graph stands for verified edges of a large corpus: many small components (near-duplicate
clusters, each a clique of 2 to 7 documents), a few stars of 100,000 leaves (a notice copied
that many times, one edge per copy to its centre) and one long path (a chain of edits, 100,000
documents), every id a random 64-bit-range long in shuffled order. Each backend runs in a
JVM of its own, on `local[2]` or on a standalone cluster started here with spark-class (one
worker, 2 cores), and is timed from the call to the last row of its labels written (Spark's
"noop" sink): the edges' read included, the check not. Every result is compared, node by
node, with scipy's labels of the same edges (the smallest id of each component); a wrong one
is reported as such, not timed.

Backends: `driver` (neardup's, collected and labelled by scipy; measured where the edges are
within its bound), `builtin` (large-star / small-star), `graphframes` (GraphFrames' two_phase
as neardup runs it) and `graphx` (GraphFrames' algorithm="graphx", one round per hop of the
longest path: given --timeout and reported as such when it runs out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
STARS, STAR_LEAVES, PATH_NODES = 3, 100_000, 100_000
ID_BASE = 1 << 40  # ids far from 0, as hashed document ids are
BACKENDS = ("driver", "builtin", "graphframes", "graphx")
DRIVER_BOUND = 2_000_000  # neardup's broadcast bound on edges (harness.BROADCAST_ROWS)


# --------------------------------------------------------------------------- the graph


def graph(edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of about `edges` edges in the shape the docstring gives."""
    rng = np.random.default_rng(seed)
    parts_src: list[np.ndarray] = []
    parts_dst: list[np.ndarray] = []
    next_node = 0
    # The stars and the path first: a fixed number of edges whatever the size.
    for _ in range(STARS):
        leaves = np.arange(next_node + 1, next_node + 1 + STAR_LEAVES)
        parts_src.append(np.full(STAR_LEAVES, next_node))
        parts_dst.append(leaves)
        next_node += STAR_LEAVES + 1
    path = np.arange(next_node, next_node + PATH_NODES)
    parts_src.append(path[:-1])
    parts_dst.append(path[1:])
    next_node += PATH_NODES
    # Cliques of 2-7 nodes for the rest.
    left = max(0, edges - STARS * STAR_LEAVES - (PATH_NODES - 1))
    sizes = np.arange(2, 8)
    per = sizes * (sizes - 1) // 2
    counts = rng.multinomial(int(left / per.mean()), np.full(len(sizes), 1 / len(sizes)))
    for s, m in zip(sizes.tolist(), counts.tolist(), strict=True):
        nodes = np.arange(next_node, next_node + m * s).reshape(m, s)
        next_node += m * s
        a, b = np.triu_indices(s, 1)
        parts_src.append(nodes[:, a].ravel())
        parts_dst.append(nodes[:, b].ravel())
    src, dst = np.concatenate(parts_src), np.concatenate(parts_dst)
    # Shuffled ids, each edge in a random direction, the rows in random order.
    ids = rng.permutation(next_node).astype(np.int64) * 7 + ID_BASE
    src, dst = ids[src], ids[dst]
    flip = rng.random(len(src)) < 0.5
    src, dst = np.where(flip, dst, src), np.where(flip, src, dst)
    order = rng.permutation(len(src))
    return src[order], dst[order]


def reference(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(node, the smallest id of its component) by scipy, independently of neardup."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes, codes = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n = len(nodes)
    m = coo_matrix((np.ones(len(src), np.int8), (codes[: len(src)], codes[len(src) :])), shape=(n, n))
    _, labels = connected_components(m, directed=False)
    smallest = np.full(labels.max() + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(smallest, labels, nodes)
    return nodes, smallest[labels]


def prepare(edges: int, seed: int, cache: Path) -> Path:
    """The graph and its reference labels as Parquet under `cache`, made once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = cache / f"components-{edges}-s{seed}"
    if (where / "done").exists():
        return where
    shutil.rmtree(where, ignore_errors=True)
    (where / "edges").mkdir(parents=True)
    (where / "reference").mkdir()
    started = time.time()
    src, dst = graph(edges, seed)
    step = 2_000_000  # several files: Spark reads them in parallel
    for i in range(0, len(src), step):
        pq.write_table(
            pa.table({"src": src[i : i + step], "dst": dst[i : i + step]}),
            where / "edges" / f"{i // step:05d}.parquet",
        )
    nodes, labels = reference(src, dst)
    for i in range(0, len(nodes), step):
        pq.write_table(
            pa.table({"_id": nodes[i : i + step], "_ref": labels[i : i + step]}),
            where / "reference" / f"{i // step:05d}.parquet",
        )
    (where / "done").write_text(
        json.dumps({"edges": len(src), "nodes": len(nodes), "seconds": time.time() - started})
    )
    return where


# --------------------------------------------------------------------------- one run (a child process)


def child(args: argparse.Namespace) -> None:
    """One backend on one master: prints a JSON line with the figures."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from neardup.runtime.packages import graphframes_package
    from neardup.stages.components import connected_components

    builder = (
        SparkSession.builder.master(args.master)
        .appName(f"components-{args.backend}")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.ui.enabled", "false")
    )
    if args.master.startswith("spark://"):
        builder = builder.config("spark.executor.memory", args.executor_memory).config(
            "spark.executor.cores", "2"
        )
    if args.backend in ("graphframes", "graphx"):
        builder = builder.config("spark.jars.packages", graphframes_package())
    spark = builder.getOrCreate()
    data = Path(args.data)
    work = Path(args.work)
    spark.sparkContext.setCheckpointDir(str(work / "checkpoints"))
    edges = spark.read.parquet(str(data / "edges"))
    started = time.perf_counter()
    if args.backend == "graphx":
        from graphframes import GraphFrame

        spark.conf.set("spark.sql.adaptive.enabled", "false")
        vertices = (
            edges.select(F.col("src").alias("id")).union(edges.select(F.col("dst").alias("id"))).distinct()
        )
        found = GraphFrame(vertices, edges).connectedComponents(algorithm="graphx")
        least = found.groupBy("component").agg(F.min("id").alias("_component"))
        labels = found.join(least, "component").select(F.col("id").alias("_id"), "_component")
        labels = labels.localCheckpoint()
    else:
        # "driver" is what auto picks within dedup's broadcast bound (on_driver).
        driver = args.backend == "driver"
        labels, _ = connected_components(
            edges,
            backend="auto" if driver else args.backend,
            checkpoint_dir=str(work / "checkpoints"),
            max_iterations=200,
            on_driver=driver,
        )
    labels.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    ref = spark.read.parquet(str(data / "reference"))
    joined = ref.join(labels, "_id", "full_outer")
    row = joined.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count(F.when(F.col("_ref").isNull() | F.col("_component").isNull(), 1)).alias("unmatched"),
        F.count(F.when(F.col("_ref") != F.col("_component"), 1)).alias("wrong"),
    ).first()
    assert row is not None
    print(
        "RESULT "
        + json.dumps(
            {
                "seconds": round(seconds, 2),
                "rows": row["rows"],
                "unmatched": row["unmatched"],
                "wrong": row["wrong"],
            }
        ),
        flush=True,
    )
    spark.stop()


# --------------------------------------------------------------------------- the standalone cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Standalone:
    """A master and one worker of 2 cores on 127.0.0.1, started with spark-class."""

    def __init__(self, logs: Path, memory: str) -> None:
        import pyspark

        home = Path(pyspark.__file__).parent
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        env["SPARK_WORKER_DIR"] = str(logs / "work")
        spark_class = str(home / "bin" / "spark-class")
        port, webui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        logs.mkdir(parents=True, exist_ok=True)
        master = [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        self.procs = [
            subprocess.Popen(
                [*master, "--webui-port", str(webui)],
                env=env,
                stdout=open(logs / "master.log", "wb"),  # noqa: SIM115 - lives as long as the process
                stderr=subprocess.STDOUT,
            )
        ]
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1"]
        worker += ["--cores", "2", "--memory", memory, "--webui-port", str(_free_port())]
        self.procs.append(
            subprocess.Popen(
                worker,
                env=env,
                stdout=open(logs / "worker.log", "wb"),  # noqa: SIM115 - lives as long as the process
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=5) as r:
                    if any(w["state"] == "ALIVE" for w in json.loads(r.read()).get("workers", [])):
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError("the standalone worker did not register within 120 s")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


# --------------------------------------------------------------------------- the table


def run_one(data: Path, master: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.cache) / "components-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--data", str(data), "--work", str(work)]
    cmd += ["--master", master, "--backend", backend, "--partitions", str(args.partitions)]
    cmd += ["--driver-memory", args.driver_memory, "--executor-memory", args.executor_memory]
    log = work.parent / f"components-{backend}.log"
    started = time.time()
    try:
        with open(log, "w") as out:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=out, text=True, timeout=args.timeout, cwd=ROOT
            )
    except subprocess.TimeoutExpired:
        return {"status": f"not done in {args.timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = log.read_text(errors="replace").strip().splitlines()[-2:]
        return {"status": f"failed (exit {proc.returncode}): {' | '.join(tail)[-200:]}"}
    found = json.loads(lines[-1][len("RESULT ") :])
    found["wall"] = round(time.time() - started, 1)
    found["status"] = "right" if found["wrong"] == 0 and found["unmatched"] == 0 else "WRONG"
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--edges", default="1000000,10000000", help="comma-separated sizes")
    p.add_argument("--masters", default="local,standalone")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partitions", type=int, default=8, help="spark.sql.shuffle.partitions")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--executor-memory", default="6g")
    p.add_argument("--worker-memory", default="7g")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--cache", default="/tmp/neardup-bench")
    p.add_argument("--out", default=str(BENCH / "results" / "components.md"))
    p.add_argument("--label", default="neardup")
    # The child's own arguments.
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    sizes = [int(x) for x in args.edges.split(",")]
    masters = args.masters.split(",")
    backends = args.backends.split(",")
    rows: list[str] = []
    for n in sizes:
        data = prepare(n, args.seed, Path(args.cache))
        meta = json.loads((data / "done").read_text())
        print(f"{n:,} edges: {meta['edges']:,} edges, {meta['nodes']:,} nodes", flush=True)
        for master_name in masters:
            cluster = (
                Standalone(Path(args.cache) / "components-cluster", args.worker_memory)
                if master_name == "standalone"
                else None
            )
            master = cluster.url if cluster else "local[2]"
            try:
                for backend in backends:
                    if backend == "driver" and meta["edges"] > DRIVER_BOUND:
                        continue  # above its bound auto never picks it
                    r = run_one(data, master, backend, args)
                    print(f"  {master_name} {backend}: {r}", flush=True)
                    secs = f"{r['seconds']:.1f}" if r.get("status") == "right" else "-"
                    rows.append(f"| {meta['edges']:,} | {master_name} | {backend} | {secs} | {r['status']} |")
            finally:
                if cluster:
                    cluster.stop()
    load = os.getloadavg()
    text = "\n".join(
        [
            f"## {args.label}",
            "",
            f"Graph: cliques of 2-7 nodes, {STARS} stars of {STAR_LEAVES:,} leaves, a path of "
            f"{PATH_NODES:,} nodes; ids shuffled (seed {args.seed}). Seconds from the call to the labels "
            "written (noop), the edges' read included; each result checked node by node against scipy. "
            "local[2], or a standalone master and one 2-core worker; "
            f"spark.sql.shuffle.partitions={args.partitions}.",
            "",
            "| edges | master | backend | seconds | result |",
            "|---:|---|---|---:|---|",
            *rows,
            "",
            f"Load average at the end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. Command: "
            f"`python -m bench components --edges {args.edges} --masters {args.masters} "
            f"--backends {args.backends}`",
            "",
        ]
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    old = out.read_text() if out.exists() else "# Connected components: backend against backend\n\n"
    out.write_text(old.rstrip() + "\n\n" + text)
    print(text)


if __name__ == "__main__":
    main()
