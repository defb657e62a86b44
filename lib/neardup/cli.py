"""The command line: `neardup dedup|tune|evaluate|decontaminate|index ...` (also
`python -m neardup`, jobs/dedup.py).

Parse arguments, build the config and the session, call the command (commands/), and
print one line for a failure with a distinct exit code (0 done, 2 usage or config error,
3 input data error, 4 index refused, 5 storage, 6 locked, 130 interrupted, 1 anything
else; runtime/failures.py reads Spark's and the JVM's failures).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from neardup import __version__
from neardup.errors import NeardupError, UsageError, stage_of
from neardup.runtime import interrupts
from neardup.runtime.failures import EXIT_INTERRUPTED, EXIT_OK, RunFacts, require_pyspark

log = logging.getLogger("neardup")

# What dedup's driver imports after the session is up and that takes about a second to
# import, numba and pyarrow (through the kernels): imported while the JVM starts instead.
# With report.html, matplotlib too (report/charts.py).
# The driver's first kernel call loads numba's compiled code and sets up its code generator
# (0.3 s): done while the JVM starts. (Normalization is the driver's first kernel where it
# scores pairs itself: the star rounds and the guard of a small run.)
_DEDUP_PRELOAD = ["neardup.kernels.signatures", "neardup.kernels.textnorm:warm"]
_HTML_PRELOAD = ["neardup.report.charts"]
# `neardup tune --input` defaults: documents and text bytes of the sample, test level.
SAMPLE_SIZE, SAMPLE_BYTES, ALPHA = 10_000, "64m", 0.01


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 itself; keep our one-line format
        raise UsageError(message)


def _add_input(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--input",
        required=required,
        metavar="PATH",
        help="file, directory, or catalog table (with --format table)",
    )
    p.add_argument(
        "--format", choices=["parquet", "jsonl", "csv", "table"], help="input format (default: from the path)"
    )
    p.add_argument("--id-col", help="id column (default: id)")
    p.add_argument("--text-col", help="text column (default: text)")


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="YAML overlay; repeatable")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, the value in YAML (a list: 'survivor.priority=[a, b]'); repeatable",
    )


def _add_session(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master URL (default: local[*] unless spark-submit chose one)")
    p.add_argument(
        "--conf", action="append", default=[], metavar="SPARK_KEY=VALUE", help="Spark setting; repeatable"
    )
    p.add_argument("--debug", action="store_true", help="print tracebacks and Spark's own logs")
    p.add_argument("--quiet", action="store_true", help="only errors and the final summary")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="neardup", description="Near-duplicate detection on Apache Spark.")
    parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    d = sub.add_parser("dedup", help="find near-duplicates and keep one document per cluster")
    _add_input(d, required=True)
    d.add_argument(
        "--output",
        required=True,
        help="output directory (kept/, clusters/, rejected/, report.json, report.html)",
    )
    _add_config(d)
    d.add_argument("--overwrite", action="store_true", help="replace an existing output")
    d.add_argument(
        "--against",
        metavar="INDEX",
        help="also deduplicate against this index (neardup index build); indexed documents are never removed",
    )
    _add_session(d)
    _add_index_parser(sub)
    t = sub.add_parser(
        "tune",
        help="the bands and rows dedup would use, their S-curve and error areas; "
        "with --input, the curve measured on a sample of the corpus",
    )
    _add_config(t)
    t.add_argument("--threshold", type=float, metavar="T", help="lsh.threshold (after --config and --set)")
    t.add_argument("--num-perm", type=int, metavar="K", help="minhash.num_perm (after --config and --set)")
    t.add_argument(
        "--bands", type=int, metavar="B", help="lsh.bands, to try a banding of your own (with --rows)"
    )
    t.add_argument(
        "--rows", type=int, metavar="R", help="lsh.rows, to try a banding of your own (with --bands)"
    )
    _add_input(t, required=False)
    t.add_argument(
        "--sample", type=int, metavar="N", help=f"documents to sample from --input (default {SAMPLE_SIZE:,})"
    )
    t.add_argument(
        "--sample-bytes",
        metavar="SIZE",
        help=f"at most this much text in the sample (default {SAMPLE_BYTES})",
    )
    t.add_argument(
        "--alpha", type=float, default=ALPHA, help=f"significance level of the test (default {ALPHA:g})"
    )
    t.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_session(t)

    e = sub.add_parser(
        "evaluate", help="score a finished output, against labels or by sampling what it removed"
    )
    e.add_argument("--output", required=True, help="a finished neardup output directory")
    e.add_argument(
        "--labels",
        help="Parquet or JSON Lines: columns id and cluster (a cluster id per document) or id_a and id_b "
        "(duplicate pairs)",
    )
    e.add_argument(
        "--sample", type=int, default=2000, help="without labels: removed documents to score (default 2000)"
    )
    e.add_argument(
        "--seed", type=int, help="without labels: the sample's seed (default: the run's minhash.seed)"
    )
    e.add_argument(
        "--min-similarity",
        type=float,
        help="without labels: a removal is right at or above this Jaccard (default: the run's "
        "guard.threshold, the verify threshold minus 0.1)",
    )
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_session(e)
    _add_decontaminate(sub)
    return parser


def _add_decontaminate(sub: Any) -> None:
    x = sub.add_parser(
        "decontaminate",
        help="remove the documents that contain evaluation data: a run of n words shared with a "
        "reference item, or a near-duplicate of one",
    )
    _add_input(x, required=True)
    x.add_argument(
        "--reference",
        required=True,
        metavar="PATH",
        help="the evaluation sets: a Parquet or JSON Lines file, or a directory of them",
    )
    x.add_argument(
        "--reference-format", choices=["parquet", "jsonl"], help="reference format (default: from the path)"
    )
    x.add_argument("--reference-id-col", help="the reference's id column (default: the input's)")
    x.add_argument("--reference-text-col", help="the reference's text column (default: the input's)")
    x.add_argument(
        "--output", required=True, help="output directory (kept/, removed/, matches/, rejected/, report.json)"
    )
    _add_config(x)
    x.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_session(x)


def _add_index_parser(sub: Any) -> None:
    i = sub.add_parser("index", help="a persistent index of deduplicated corpora, for dedup --against")
    actions = i.add_subparsers(dest="index_command", required=True, parser_class=_Parser)
    for name, what in (
        ("build", "index a deduplicated corpus (its band keys; its texts stay where they are)"),
        ("add", "append a batch's kept documents to an index, atomically"),
    ):
        a = actions.add_parser(name, help=what)
        _add_input(a, required=True)
        a.add_argument("--index", required=True, metavar="PATH", help="the index directory")
        _add_config(a)
        if name == "build":
            a.add_argument("--overwrite", action="store_true", help="replace an existing index")
        _add_session(a)
    v = actions.add_parser(
        "verify", help="read an index whole: every file, footer and page (exit 4 if damaged)"
    )
    v.add_argument("index_path", metavar="INDEX", help="the index directory")
    _add_session(v)


def console() -> int:
    """The `neardup` program: `main`, then, where this process is the program itself (its
    main module the console script or `python -m neardup`) and launched its own JVM, an
    immediate exit once the streams are flushed. Every output is published by then, and
    tearing down the modules a run imported (numba, llvmlite, scipy, matplotlib) took 0.4 s
    of a 12 s run. Called in a host's process instead (Databricks calls this entry in its
    driver's, with its session; a notebook or a task runner might without one), it returns
    the exit code as `main` does."""
    code = main()
    session = sys.modules.get("neardup.runtime.session")
    if _the_program() and session is not None and session.launched_here():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    return code


def _the_program() -> bool:
    """Whether this process runs neardup as its program: its main module is the `neardup`
    console script or `neardup.__main__`."""
    top = sys.modules.get("__main__")
    spec = getattr(top, "__spec__", None)
    if spec is not None and spec.name == "neardup.__main__":
        return True
    path = getattr(top, "__file__", None) or ""
    return os.path.basename(path).removesuffix(".exe") == "neardup"


def main(argv: Sequence[str] | None = None) -> int:
    with interrupts.handled():  # Ctrl-C and SIGTERM: exit 130 (runtime/interrupts.py)
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    run = RunFacts()
    try:
        args = build_parser().parse_args(args_list)
        code = _COMMANDS[args.command](args, run)
        run.discard_log()
        return code
    except NeardupError as e:
        if (stopped := interrupts.interruption(e)) is not None:  # raised while Ctrl-C was handled
            return _interrupted(stopped, run, debug, e)
        if debug:
            raise
        _error(str(e))
        run.discard_log()
        return e.exit_code
    except KeyboardInterrupt as e:
        return _interrupted(e, run, debug)
    except Exception as e:  # the contract is one line, not a traceback
        if (stopped := interrupts.interruption(e)) is not None:  # clean-up failed after Ctrl-C
            return _interrupted(stopped, run, debug, e)
        told = run.explain(e)
        if debug:
            if told.jvm_died:
                _error(told.message)
            raise
        _error(told.message)
        if told.discard_log:
            run.discard_log()
        return told.exit_code


def _interrupted(
    e: KeyboardInterrupt, run: RunFacts, debug: bool, raised: BaseException | None = None
) -> int:
    """Ctrl-C or SIGTERM: the jobs were cancelled (runtime/interrupts.py), the staging
    folder stays for a rerun to resume from."""
    if debug:
        traceback.print_exception(raised or e)
    how = getattr(e, "signal_name", "SIGINT")
    stage = stage_of(raised or e)
    where = f" in stage {stage}" if stage else ""
    _error(f"interrupted by {how}{where}; nothing was published")
    run.discard_log()
    return EXIT_INTERRUPTED


def _error(message: str) -> None:
    first = " ".join(message.strip().split())
    print(f"neardup: error: {first}", file=sys.stderr)


def _input_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.format:
        overrides.setdefault("input", {})["format"] = args.format
    if args.id_col:
        overrides.setdefault("input", {})["id_col"] = args.id_col
    if args.text_col:
        overrides.setdefault("input", {})["text_col"] = args.text_col
    return overrides


def _load_config(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """The config of the layers and the command's own flags; its warnings go to the log."""
    from neardup import config as config_mod

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", config_mod.ConfigWarning)
        cfg = config_mod.load(args.config, args.set, args.conf, overrides)
    _log_to_stderr(logging.WARNING if args.quiet else logging.INFO)
    for w in caught:
        log.warning("config: %s", w.message)
    return cfg


def _archive_note(started: Any) -> None:
    """Say so when this run left a process behind it to build the class archive."""
    if started.archive_building is not None:
        log.info(
            "class archive: built in the background after this run, for faster starts (%s; "
            "NEARDUP_CLASS_ARCHIVE=0 turns it off)",
            started.archive_building,
        )


def _session(
    args: argparse.Namespace,
    cfg: Any,
    run: RunFacts,
    packages: Mapping[str, str] | None = None,
    preload: Sequence[str] = (),
    small_input: bool = False,
) -> Any:
    """Start (or reuse) the SparkSession for cfg, importing `preload` meanwhile (`small_input`:
    see session.start); remembers it in `run` for the error handler."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    require_pyspark()
    from neardup.runtime.session import launched_log, start

    try:
        run.started = started = start(
            args.master,
            cfg.spark,
            quiet_jvm=not args.debug,
            packages=packages,
            preload=preload,
            small_input=small_input,
        )
    finally:
        run.log = launched_log()  # also when the session failed to start: the error names it
    spark = started.spark
    interrupts.install()  # creating the SparkContext installed pyspark's SIGINT handler
    if not args.debug:
        _quiet_python_side(spark)
    conf = spark.sparkContext.getConf()
    local = str(spark.sparkContext.master).startswith("local")
    run.heap = conf.get("spark.driver.memory" if local else "spark.executor.memory")
    return spark


def _dedup(args: argparse.Namespace, run: RunFacts) -> int:
    overrides = _input_overrides(args)
    if args.overwrite:
        overrides["output"] = {"overwrite": True}
    cfg = _load_config(args, overrides)
    run.writes = args.output  # named by a storage error that names no path
    require_pyspark()  # before the modules below import it
    from neardup.report import check_renderer

    check_renderer(cfg)  # before the JVM starts
    packages: dict[str, str] = {}
    if cfg.components.backend == "graphframes":
        from neardup.runtime import packages as gf

        missing = gf.graphframes_python_missing()
        if missing:  # before the JVM starts: one line, not an import error stages later
            raise UsageError(missing)
        packages[gf.graphframes_package(cfg.components.graphframes_package)] = gf.GRAPHFRAMES_CLASS
    from neardup.runtime.session import small_local_input

    preload = _DEDUP_PRELOAD + (_HTML_PRELOAD if cfg.report.html else [])
    # A run against an index reads the index too, whatever the batch's size.
    small = cfg.input.format != "table" and args.against is None and small_local_input(args.input)
    spark = _session(args, cfg, run, packages, preload, small)
    from neardup.commands import dedup

    started = run.started
    conf = spark.sparkContext.getConf()
    log.info(
        "neardup %s on %s, %s: input %s, threshold %.2f, %d bands x %d rows of %d %s permutations, verify %s",
        __version__,
        spark.sparkContext.master,
        started.heap_note
        or f"executors' heap {conf.get('spark.executor.memory', '1g')} (spark.executor.memory)",
        args.input,
        cfg.lsh.threshold,
        cfg.bands,
        cfg.rows,
        cfg.minhash.num_perm,
        cfg.minhash.method,
        cfg.verify.method,
    )
    if started.jvm_log is not None:
        log.info("Spark's own log: %s (kept if the run fails; --debug shows it here)", started.jvm_log)
    _archive_note(started)
    for key in started.not_applied:
        log.warning("%s was not applied: the active Spark session cannot change it", key)
    result = dedup.run(spark, cfg, args.input, args.output, against=args.against)
    print(dedup.summary(result.output, result.report))
    return EXIT_OK


def _index(args: argparse.Namespace, run: RunFacts) -> int:
    """`neardup index build|add`: the same config layers as dedup (the band-key parameters
    must be the ones dedup --against will run with)."""
    if args.index_command == "verify":
        return _index_verify(args, run)
    cfg = _load_config(args, _input_overrides(args))
    run.writes = args.index
    spark = _session(args, cfg, run)
    if run.started.jvm_log is not None:
        log.info("Spark's own log: %s (kept if the run fails; --debug shows it here)", run.started.jvm_log)
    _archive_note(run.started)
    from neardup.commands import index

    if args.index_command == "build":
        result = index.build(spark, cfg, args.input, args.index, args.overwrite)
    else:
        result = index.add(spark, cfg, args.input, args.index)
    print(index.summary(args.input, result))
    return EXIT_OK


def _index_verify(args: argparse.Namespace, run: RunFacts) -> int:
    """`neardup index verify INDEX`: no signing, so only the session's settings (--conf)."""
    from neardup import config as config_mod

    cfg = config_mod.load(spark_conf=args.conf)
    _log_to_stderr(logging.WARNING if args.quiet else logging.INFO)
    spark = _session(args, cfg, run)
    from neardup.commands import index_verify

    print(index_verify.verify_summary(args.index_path, index_verify.verify(spark, args.index_path)))
    return EXIT_OK


def _tune_flags(args: argparse.Namespace) -> tuple[int, int, dict[str, Any]]:
    """Checked `tune` flags: (sample documents, sample bytes, config overrides)."""
    from neardup.runtime.memory import parse_size

    if args.threshold is not None and not 0.0 < args.threshold < 1.0:
        raise UsageError(f"--threshold must be strictly between 0 and 1, not {args.threshold}")
    if args.input is None and (args.sample is not None or args.sample_bytes is not None):
        raise UsageError("--sample and --sample-bytes need --input, the corpus to sample")
    size = SAMPLE_SIZE if args.sample is None else args.sample
    if size < 2:
        raise UsageError(f"--sample must be at least 2 documents (a pair), not {size}")
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha must be strictly between 0 and 1, not {args.alpha}")
    try:
        max_bytes = parse_size(args.sample_bytes or SAMPLE_BYTES)
    except ValueError:
        raise UsageError(f"--sample-bytes must be a size such as 64m, not {args.sample_bytes!r}") from None
    if max_bytes < 1:
        raise UsageError(f"--sample-bytes must be at least one byte, not {args.sample_bytes!r}")
    # The flags are the keys dedup reads, applied after --config and --set.
    overrides = _input_overrides(args)
    lsh = {"threshold": args.threshold, "bands": args.bands, "rows": args.rows}
    if any(v is not None for v in lsh.values()):
        overrides["lsh"] = {k: v for k, v in lsh.items() if v is not None}
    if args.num_perm is not None:
        overrides["minhash"] = {"num_perm": args.num_perm}
    return size, max_bytes, overrides


def _tune(args: argparse.Namespace, run: RunFacts) -> int:
    """`neardup tune`: the theory needs no Spark; `--input` samples the corpus with it."""
    size, max_bytes, overrides = _tune_flags(args)
    cfg = _load_config(args, overrides)
    from neardup.commands import tune

    measurement = None
    if args.input is not None:
        require_pyspark()
        from neardup.commands import dedup
        from neardup.kernels.measure import measure_pairs
        from neardup.runtime.stagelog import StageLog
        from neardup.stages.sign import sign_params

        spark = _session(args, cfg, run)
        if run.started.jvm_log is not None:
            log.info("Spark's own log: %s (--debug shows it here)", run.started.jvm_log)
        _archive_note(run.started)
        drawn = dedup.sample(spark, cfg, args.input, size, max_bytes)
        with StageLog().stage("measure") as counts:
            pairs = measure_pairs(drawn.texts, sign_params(cfg))
            counts.update(candidate_pairs=pairs.candidates, pairs=len(pairs.similarity))
        info = tune.SampleInfo(
            args.input, size, max_bytes, drawn.smallest, len(drawn.texts), drawn.text_bytes
        )
        measurement = tune.measured(cfg, info, pairs, args.alpha)
    rep = tune.report(cfg, measurement)
    print(json.dumps(rep, indent=2) if args.json else tune.render(rep))
    return EXIT_OK


def _evaluate(args: argparse.Namespace, run: RunFacts) -> int:
    from neardup import config as config_mod

    if args.sample < 1:
        raise UsageError(f"--sample must be at least 1, not {args.sample}")
    if args.min_similarity is not None and not 0.0 < args.min_similarity <= 1.0:
        raise UsageError(f"--min-similarity must be in (0, 1], not {args.min_similarity}")
    cfg = config_mod.load(spark_conf=args.conf)
    _log_to_stderr(logging.WARNING if args.quiet or args.json else logging.INFO)
    spark = _session(args, cfg, run)
    from neardup.commands.evaluate import as_text, evaluate

    result = evaluate(spark, args.output, args.labels, args.sample, args.seed, args.min_similarity)
    print(json.dumps(result, indent=2) if args.json else as_text(result))
    return EXIT_OK


def _decontaminate(args: argparse.Namespace, run: RunFacts) -> int:
    overrides = _input_overrides(args)
    flags = {
        "reference_format": args.reference_format,
        "reference_id_col": args.reference_id_col,
        "reference_text_col": args.reference_text_col,
    }
    if any(v is not None for v in flags.values()):
        overrides["decontaminate"] = {k: v for k, v in flags.items() if v is not None}
    if args.overwrite:
        overrides["output"] = {"overwrite": True}
    cfg = _load_config(args, overrides)
    run.writes = args.output
    spark = _session(args, cfg, run)
    from neardup.commands import decontaminate

    params = decontaminate.decon_params(cfg)
    ngram = f"{params.ngram} words in a row" if params.ngram else "no n-grams"
    near = (
        f"near-duplicates at {params.threshold:.2f} ({params.verify})"
        if params.threshold
        else "no near-duplicates"
    )
    log.info(
        "neardup %s decontaminate on %s: input %s, reference %s; %s, %s",
        __version__,
        spark.sparkContext.master,
        args.input,
        args.reference,
        ngram,
        near,
    )
    if run.started.jvm_log is not None:
        log.info("Spark's own log: %s (kept if the run fails; --debug shows it here)", run.started.jvm_log)
    _archive_note(run.started)
    result = decontaminate.run(spark, cfg, args.input, args.reference, args.output)
    print(decontaminate.summary(result.output, result.report))
    return EXIT_OK


_COMMANDS = {
    "dedup": _dedup,
    "tune": _tune,
    "evaluate": _evaluate,
    "decontaminate": _decontaminate,
    "index": _index,
}


def _quiet_python_side(spark: Any) -> None:
    """When the JVM dies, pyspark's accumulator server and py4j print tracebacks of their
    broken sockets; the user reads one line from us instead (`--debug` keeps them)."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None
    root = logging.getLogger()
    if not root.handlers:  # py4j logs to the root logger, which would print its tracebacks
        root.addHandler(logging.NullHandler())


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """neardup's one line per stage; writes to the current sys.stderr (tests capture it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _log_to_stderr(level: int) -> None:
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s neardup %(message)s", "%H:%M:%S"))
        log.addHandler(handler)
    log.setLevel(level)
