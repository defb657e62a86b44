"""Configuration: defaults, layering, and every check pinned by a failing case."""

from __future__ import annotations

from pathlib import Path

import pytest

from neardup import config
from neardup.errors import UsageError
from neardup.kernels.bands import candidate_probability


def test_defaults_resolve_bands_within_num_perm() -> None:
    cfg = config.load()
    assert cfg.bands * cfg.rows <= cfg.minhash.num_perm
    assert cfg.verify_threshold == cfg.lsh.threshold == 0.8
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
    ],
)
def test_bad_settings_are_usage_errors(sets: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.load(sets=sets)


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


def test_only_one_of_bands_rows_given() -> None:
    cfg = config.load(sets=["lsh.bands=16"])
    assert (cfg.bands, cfg.rows) == (16, 8)
    cfg = config.load(sets=["lsh.rows=4", "minhash.num_perm=64"])
    assert (cfg.bands, cfg.rows) == (16, 4)


def test_recall_target_picks_bands_unless_bands_are_given() -> None:
    cfg = config.load(sets=["lsh.recall=0.99"])
    assert candidate_probability(0.8, cfg.bands, cfg.rows) >= 0.99
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
