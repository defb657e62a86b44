"""Configuration: defaults, layering, and every check pinned by a failing case."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from pathlib import Path

import pytest

from neardup import config
from neardup.errors import UsageError
from neardup.kernels.bands import candidate_probability


def test_defaults_resolve_bands_within_num_perm() -> None:
    cfg = config.load()
    assert cfg.bands * cfg.rows <= cfg.minhash.num_perm
    assert cfg.verify_threshold == cfg.lsh.threshold == 0.8
    assert cfg.guard_threshold == 0.7  # the verify threshold minus 0.1
    assert config.load(sets=["verify.threshold=0.9"]).guard_threshold == 0.8
    assert config.load(sets=["guard.threshold=0.75"]).guard_threshold == 0.75
    assert config.load(sets=["guard.enabled=false"]).guard_threshold is None
    assert config.load(sets=["verify.method=none", "lsh.threshold=0.95"]).guard_threshold is None
    # The defaults must catch near-certainly the pairs the issue promises (J >= 0.9).
    assert candidate_probability(0.9, cfg.bands, cfg.rows) > 0.99


def test_layers_apply_in_order(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("lsh:\n  threshold: 0.7\nminhash:\n  num_perm: 64\n")
    b = tmp_path / "b.yaml"
    b.write_text("lsh:\n  threshold: 0.6\n")
    cfg = config.load([str(a), str(b)], ["lsh.threshold=0.75", "spark.spark.sql.shuffle.partitions=3"])
    assert cfg.lsh.threshold == 0.75
    assert cfg.minhash.num_perm == 64
    assert cfg.spark["spark.sql.shuffle.partitions"] == "3"
    assert cfg.bands * cfg.rows <= 64


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["lsh.treshold=0.8"], "unknown config key lsh.treshold"),
        (["lsh.threshold=1.0"], "lsh.threshold must be strictly between 0 and 1"),
        (["lsh.threshold=0"], "lsh.threshold must be strictly between 0 and 1"),
        (["lsh.threshold=-0.2"], "lsh.threshold"),
        (["lsh.bands=20", "lsh.rows=10"], "exceeds minhash.num_perm"),
        (["minhash.method=fast"], "minhash.method must be one of classic, oph"),
        (["verify.method=maybe"], "verify.method"),
        (["survivor.policy=quality"], "survivor.column is required"),
        (["minhash.num_perm=0"], "minhash.num_perm"),
        (["minhash.num_perm=abc"], "must be an integer"),
        (["shingle.ngram=0"], "shingle.ngram"),
        (["bogus.key=1"], "unknown config section 'bogus'"),
        (["threshold=0.8"], "must be SECTION.KEY"),
        (["lsh.threshold"], "KEY=VALUE"),
        (["input.id_col=text"], "same column"),
        (["lsh.recall=1"], "lsh.recall must be strictly between 0 and 1"),
        (["lsh.all_pairs_up_to=0"], "lsh.all_pairs_up_to must be in 1..1024"),
        (["lsh.recall=0.999", "lsh.threshold=0.1", "minhash.num_perm=4"], "no lsh.bands x lsh.rows"),
        (["input.format=xml"], "input.format must be one of auto, parquet, jsonl, csv, table"),
        (["input.id_col="], "must not be null"),
        (['input.id_col=""'], "input.id_col and input.text_col must not be empty"),
        (["shingle.unit=token"], "shingle.unit must be one of word, char"),
        (["shingle.ngram=65"], "shingle.ngram must be in 1..64"),
        (["shingle.char_ngram=0"], "shingle.char_ngram must be in 1..64"),
        (["minhash.num_perm=5000"], "minhash.num_perm must be in 1..4096"),
        (["minhash.seed=-1"], "minhash.seed must be in 0..9223372036854775807"),
        (["lsh.false_positive_weight=2"], "lsh.false_positive_weight must be in 0.0..1.0"),
        (["lsh.false_negative_weight=-1"], "lsh.false_negative_weight must be in 0.0..1.0"),
        (
            ["lsh.recall=null", "lsh.false_positive_weight=0", "lsh.false_negative_weight=0"],
            "are both 0",
        ),
        (["lsh.bands=0"], "lsh.bands must be at least 1"),
        (["lsh.rows=-2"], "lsh.rows must be at least 1"),
        (["verify.threshold=0"], "verify.threshold must be in (0, 1]"),
        (["verify.threshold=1.5"], "verify.threshold must be in (0, 1]"),
        (["guard.threshold=0"], "guard.threshold must be in (0, 1]"),
        (["guard.max_rounds=0"], "guard.max_rounds must be in 1..1000"),
        (["components.backend=gx"], "components.backend must be one of auto, builtin, graphframes"),
        (["components.max_iterations=0"], "components.max_iterations must be at least 1"),
        (["survivor.policy=random"], "survivor.policy must be one of longest, earliest, quality, priority"),
        (["survivor.policy=earliest", "survivor.column=text"], "must not be the text column"),
        (["memory.batch_size=lots"], "memory.batch_size must be a size"),
        (["memory.batch_size=1k"], "memory.batch_size must be in 64k..1g"),
        (["normalize.lowercase=maybe"], "must be true or false"),
        (["lsh.threshold=high"], "must be a number"),
        # A bucket spread over tasks is never gathered: it must be a star (> all_pairs_up_to).
        (["lsh.split_buckets_over=31"], "lsh.split_buckets_over must be in 32..1099511627776"),
        (["lsh.all_pairs_up_to=4", "lsh.split_buckets_over=3"], "lsh.split_buckets_over must be in 4.."),
        (["lsh.split_buckets_over=1.5"], "must be an integer"),
        (["verify.split_stars_over=0"], "verify.split_stars_over must be in 1..1099511627776"),
        (["verify.split_stars_over=many"], "must be an integer"),
    ],
)
def test_bad_settings_are_usage_errors(sets: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.load(sets=sets)


PRIORITY = ["survivor.policy=priority", "survivor.priority_column=source"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["survivor.policy=priority", "survivor.priority=[web]"],
            "survivor.priority_column is required when",
        ),
        (PRIORITY, "survivor.priority must list at least one value when survivor.policy is priority"),
        ([*PRIORITY, "survivor.priority=[]"], "survivor.priority must list at least one value"),
        ([*PRIORITY, "survivor.priority="], "config key survivor.priority must not be null"),
        (
            [*PRIORITY, "survivor.priority=web"],
            "survivor.priority must be a list such as [wikipedia, books, web]",
        ),
        ([*PRIORITY, "survivor.priority={web: 1}"], "survivor.priority must be a list such as"),
        ([*PRIORITY, "survivor.priority=[web, books, web]"], "survivor.priority lists 'web' more than once"),
        ([*PRIORITY, "survivor.priority=[1, '1']"], "survivor.priority lists '1' more than once"),
        (
            [*PRIORITY, "survivor.priority=[web, 1.5]"],
            "survivor.priority holds 1.5: its values must be strings or",
        ),
        ([*PRIORITY, "survivor.priority=[true]"], "survivor.priority holds True"),
        ([*PRIORITY, "survivor.priority=[null]"], "survivor.priority holds None"),
        ([*PRIORITY, "survivor.priority=[2024-01-01]"], "quote dates and decimals"),
        ([*PRIORITY, "survivor.priority=[[web]]"], "survivor.priority holds ['web']"),
        (
            [*PRIORITY, "survivor.priority=[web]", "survivor.then=priority"],
            "survivor.then must be one of longest, earliest, quality, not 'priority'",
        ),
        ([*PRIORITY, "survivor.priority=[web]", "survivor.then=random"], "survivor.then must be one of"),
        (
            [*PRIORITY, "survivor.priority=[web]", "survivor.then=quality"],
            "survivor.column is required when survivor.then is quality",
        ),
        (
            ["survivor.policy=priority", "survivor.priority_column=text", "survivor.priority=[web]"],
            "survivor.priority_column must not be the text column",
        ),
        (["survivor.then=priority"], "survivor.then must be one of longest, earliest, quality"),
        (["survivor.priority=[a, a]"], "survivor.priority lists 'a' more than once"),
    ],
)
def test_bad_priority_settings_are_usage_errors(sets: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        config.load(sets=sets)


def test_priority_settings_from_the_command_line_and_files(tmp_path: Path) -> None:
    cfg = config.load(sets=[*PRIORITY, "survivor.priority=[wikipedia, books, 3]"])
    want = config.SurvivorConfig("priority", None, "source", ("wikipedia", "books", "3"), "longest")
    assert cfg.survivor == want
    # YAML flow lists without spaces, and block lists in a file, give the same.
    assert config.load(sets=[*PRIORITY, "survivor.priority=[wikipedia,books,3]"]).survivor == want
    layer = tmp_path / "priority.yaml"
    layer.write_text(
        "survivor:\n  policy: priority\n  priority_column: source\n"
        "  priority:\n    - wikipedia\n    - books\n    - 3\n  then: quality\n  column: score\n"
    )
    cfg = config.load([str(layer)])
    assert cfg.survivor == config.SurvivorConfig(
        "priority", "score", "source", ("wikipedia", "books", "3"), "quality"
    )
    # `neardup evaluate` rebuilds the config from report.json: the list comes back the same.
    shown = json.loads(json.dumps(cfg.to_dict()))
    assert shown["survivor"]["priority"] == ["wikipedia", "books", "3"]
    assert config.build({k: v for k, v in shown.items() if k != "spark"}).survivor == cfg.survivor
    # then: earliest needs no column (the smallest id then decides).
    assert (
        config.load(sets=[*PRIORITY, "survivor.priority=[web]", "survivor.then=earliest"]).survivor.column
        is None
    )


def test_priority_keys_under_another_policy_warn() -> None:
    for extra in ("survivor.priority_column=source", "survivor.priority=[web]", "survivor.then=earliest"):
        with pytest.warns(
            config.ConfigWarning, match="read only when survivor.policy is priority, and it is longest"
        ):
            config.load(sets=[extra])
    with warnings.catch_warnings():
        warnings.simplefilter("error", config.ConfigWarning)
        config.load(sets=[*PRIORITY, "survivor.priority=[web]", "survivor.then=earliest"])


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        config.load([str(tmp_path / "nope.yaml")])
    bad = tmp_path / "bad.yaml"
    bad.write_text("lsh: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        config.load([str(bad)])
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(UsageError, match="must hold a mapping"):
        config.load([str(scalar)])


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    evil = tmp_path / "evil.yaml"
    evil.write_text("lsh: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        config.load([str(evil)])


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("num_perm", [16, 64, 128, 256])
def test_derived_bands_fit_and_centre_on_threshold(threshold: float, num_perm: int) -> None:
    sets = [f"lsh.threshold={threshold}", f"minhash.num_perm={num_perm}"]
    if 1 - (1 - threshold) ** num_perm < 0.999:  # out of reach even with one row per band
        with pytest.raises(UsageError, match="lower the recall or raise num_perm"):
            config.load(sets=sets)
        sets.append("lsh.recall=0.99")
    cfg = config.load(sets=sets)
    # The default derivation: a pair at the threshold is caught with probability >= 0.999.
    assert cfg.bands * cfg.rows <= num_perm
    assert candidate_probability(threshold, cfg.bands, cfg.rows) >= cfg.lsh.recall
    cfg = config.load(sets=[*sets, "lsh.recall=null"])  # the weighted-area derivation
    b, r = cfg.bands, cfg.rows
    assert b >= 1 and r >= 1 and b * r <= num_perm
    # The S-curve's steepest rise is near its (1/b)^(1/r) point; it must sit near the threshold.
    assert abs((1 / b) ** (1 / r) - threshold) < 0.2


def test_split_thresholds_default_to_derived_and_take_low_values() -> None:
    cfg = config.load()
    assert (cfg.lsh.split_buckets_over, cfg.verify.split_stars_over) == (None, None)
    cfg = config.load(sets=["lsh.all_pairs_up_to=2", "lsh.split_buckets_over=2", "verify.split_stars_over=1"])
    assert (cfg.lsh.split_buckets_over, cfg.verify.split_stars_over) == (2, 1)


def test_only_one_of_bands_rows_given() -> None:
    cfg = config.load(sets=["lsh.bands=16"])
    assert (cfg.bands, cfg.rows) == (16, 8)
    cfg = config.load(sets=["lsh.rows=4", "minhash.num_perm=64"])
    assert (cfg.bands, cfg.rows) == (16, 4)


def test_recall_target_picks_bands_unless_bands_are_given() -> None:
    cfg = config.load(sets=["lsh.recall=0.99"])
    assert candidate_probability(0.8, cfg.bands, cfg.rows) >= 0.99
    with pytest.warns(config.ConfigWarning, match="uses 50 of minhash.num_perm = 128 slots"):
        assert config.load(sets=["lsh.recall=0.99", "lsh.bands=10", "lsh.rows=5"]).bands == 10


def test_credentials_are_redacted_in_the_report_view() -> None:
    cfg = config.load(
        spark_conf=[
            "spark.hadoop.fs.s3a.access.key=AKIAEXAMPLE",
            "spark.hadoop.fs.s3a.secret.key=s3cr3t",
            "spark.ssl.keyStorePassword=pw",
            "spark.databricks.token=dapi123",
            "spark.sql.shuffle.partitions=9",
        ]
    )
    shown = config.Config.to_dict(cfg)["spark"]
    assert shown["spark.sql.shuffle.partitions"] == "9"
    for k in (
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.ssl.keyStorePassword",
    ):
        assert shown[k] == config.REDACTED
    assert "dapi123" not in str(shown) and "s3cr3t" not in str(shown)
    # The live config keeps the values: Spark needs them.
    assert cfg.spark["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t"


@pytest.mark.parametrize(
    ("section", "changes", "message"),
    [
        ("lsh", {"threshold": 1.5}, "lsh.threshold must be strictly between 0 and 1"),
        ("minhash", {"method": "fast"}, "minhash.method must be one of classic, oph"),
        ("survivor", {"policy": "quality", "column": None}, "survivor.column is required"),
        ("memory", {"batch_size": "huge"}, "memory.batch_size must be a size"),
        ("survivor", {"policy": "priority"}, "survivor.priority_column is required"),
        ("survivor", {"priority": ["a", "a"]}, "survivor.priority lists 'a' more than once"),
        ("survivor", {"priority": "web"}, "survivor.priority must be a list"),
        ("survivor", {"then": "priority"}, "survivor.then must be one of"),
        ("lsh", {"split_buckets_over": 2}, "lsh.split_buckets_over must be in 32.."),
        ("verify", {"split_stars_over": -1}, "verify.split_stars_over must be in 1.."),
    ],
)
def test_replace_cannot_skip_a_check(section: str, changes: dict[str, object], message: str) -> None:
    cfg = config.load()
    with pytest.raises(UsageError, match=message):
        dataclasses.replace(getattr(cfg, section), **changes)


def test_replace_cannot_skip_the_cross_section_rules() -> None:
    cfg = config.load()
    with pytest.raises(UsageError, match=r"exceeds minhash\.num_perm"):
        dataclasses.replace(cfg, minhash=dataclasses.replace(cfg.minhash, num_perm=16))
    with pytest.raises(UsageError, match="must not be the text column"):
        dataclasses.replace(cfg, survivor=config.SurvivorConfig(policy="earliest", column="text"))
    with pytest.raises(UsageError, match=r"survivor\.priority_column must not be the text column"):
        dataclasses.replace(
            cfg, survivor=config.SurvivorConfig(policy="priority", priority_column="text", priority=("a",))
        )


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["lsh.bands=4", "lsh.rows=5"], "uses 20 of minhash.num_perm = 128 slots"),
        (["lsh.bands=2", "lsh.rows=32", "minhash.num_perm=64"], "with probability 0.00"),
        (["verify.method=none", "lsh.threshold=0.5"], "verify.method = none at lsh.threshold = 0.5"),
        (["verify.method=signature", "minhash.num_perm=32", "lsh.recall=0.99"], "num_perm = 32"),
        (["guard.threshold=0.85"], "guard.threshold = 0.85 is above the verify threshold 0.8"),
    ],
)
def test_footguns_warn(sets: list[str], message: str) -> None:
    with pytest.warns(config.ConfigWarning, match=message):
        config.load(sets=sets)


def test_defaults_and_derived_bands_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", config.ConfigWarning)
        config.load()
        config.load(sets=["lsh.threshold=0.3"])  # derived: 20 of 128 slots is the derivation's choice
        config.load(sets=["verify.method=none", "lsh.threshold=0.95"])


def test_allowed_values_are_written_once() -> None:
    from neardup.kernels import hashing, minhash, policy
    from neardup.stages import components

    assert config.UNITS is hashing.UNITS and config.METHODS is minhash.METHODS
    assert config.POLICIES is policy.POLICIES and config.THEN_POLICIES is policy.THEN_POLICIES
    assert components.BACKENDS is config.BACKENDS
