"""The decontaminate: config section: defaults, how they resolve, and every check pinned by
a failing case."""

from __future__ import annotations

import pytest

from neardup import config
from neardup.errors import UsageError


def test_defaults_and_resolution() -> None:
    cfg = config.load()
    d = cfg.decontaminate
    assert (d.ngram_matching, d.ngram, d.near_duplicates, d.verify) == (True, 13, True, "exact")
    assert d.max_reference_bytes == "32m" and d.reference_format == "auto"
    assert cfg.decontaminate_threshold == cfg.verify_threshold == 0.8
    assert config.load(sets=["verify.threshold=0.9"]).decontaminate_threshold == 0.9
    assert config.load(sets=["decontaminate.threshold=0.85"]).decontaminate_threshold == 0.85
    assert config.load(sets=["decontaminate.near_duplicates=false"]).decontaminate_threshold is None
    assert d.reference_columns(cfg.input) == ("id", "text")
    other = config.load(sets=["input.id_col=doc", "decontaminate.reference_text_col=question"])
    assert other.decontaminate.reference_columns(other.input) == ("doc", "question")
    assert config.load(
        sets=["decontaminate.max_reference_bytes=1048576"]
    ).decontaminate.max_reference_bytes == ("1048576")


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["decontaminate.ngram_matching=false", "decontaminate.near_duplicates=false"],
            "decontaminate.ngram_matching and decontaminate.near_duplicates are both false",
        ),
        (["decontaminate.ngram=0"], "decontaminate.ngram must be in 1..1000"),
        (["decontaminate.ngram=1001"], "decontaminate.ngram must be in 1..1000"),
        (["decontaminate.ngram=13.5"], "decontaminate.ngram must be an integer"),
        (["decontaminate.threshold=0"], "decontaminate.threshold must be in (0, 1]"),
        (["decontaminate.threshold=1.5"], "decontaminate.threshold must be in (0, 1]"),
        (["decontaminate.threshold=.nan"], "decontaminate.threshold must be in (0, 1]"),
        (["decontaminate.verify=none"], "decontaminate.verify must be one of exact, signature"),
        (
            ["decontaminate.reference_format=csv"],
            "decontaminate.reference_format must be one of auto, parquet",
        ),
        (['decontaminate.reference_id_col=""'], "decontaminate.reference_id_col must not be empty"),
        (['decontaminate.reference_text_col=""'], "decontaminate.reference_text_col must not be empty"),
        (["decontaminate.reference_id_col=text"], "reference_text_col name the same column 'text'"),
        (["input.text_col=body", "decontaminate.reference_text_col=id"], "name the same column 'id'"),
        (["decontaminate.max_reference_bytes=lots"], "decontaminate.max_reference_bytes must be a size"),
        (["decontaminate.max_reference_bytes=512"], "decontaminate.max_reference_bytes must be in 1k..2g"),
        (["decontaminate.max_reference_bytes=3g"], "decontaminate.max_reference_bytes must be in 1k..2g"),
        (["decontaminate.ngram_matching=maybe"], "decontaminate.ngram_matching must be true or false"),
        (["decontaminate.colour=red"], "unknown config key decontaminate.colour"),
    ],
)
def test_every_check(sets: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        config.load(sets=sets)


def test_a_threshold_the_bands_do_not_reach_warns() -> None:
    with pytest.warns(config.ConfigWarning, match=r"decontaminate\.threshold = 0\.5 with 18 x 5 bands"):
        config.load(sets=["decontaminate.threshold=0.5"])
    # The bands chosen for that threshold reach it: no warning.
    config.load(sets=["decontaminate.threshold=0.5", "lsh.threshold=0.5"])
