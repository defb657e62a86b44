"""The run's configuration: YAML layers merged, checked, frozen.

Layers, later wins: the packaged `default.yaml` < each `--config FILE` < each
`--set KEY=VALUE`. Every key must exist in the defaults, so a typo is an error
(exit 2) rather than a silently ignored setting. Each section checks its values when it
is made (`__post_init__`, so `dataclasses.replace` cannot skip a check) and `Config`
checks the rules that span sections (b * r <= num_perm). Each key's allowed values are
written once: the kernels' own (shingle units, MinHash methods) where the kernels are,
the rest here. Settings that work but are probably a mistake give a `ConfigWarning`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from neardup.errors import UsageError
from neardup.kernels.bands import bands_for_recall, candidate_probability, optimal_bands
from neardup.kernels.choices import DECON_VERIFY, METHODS, UNITS
from neardup.kernels.policy import POLICIES, PRIORITY, THEN_POLICIES
from neardup.runtime.memory import GiB, KiB, parse_size

FORMATS = ("auto", "parquet", "jsonl", "csv", "table")
MALFORMED = ("fail", "reject")
VERIFY_METHODS = ("exact", "signature", "none")
BACKENDS = ("auto", "builtin", "graphframes")
REFERENCE_FORMATS = ("auto", "parquet", "jsonl")
REDACTED = "*** redacted ***"
# report.html shows each sampled cluster's texts: a bound keeps what the driver collects small.
MAX_SAMPLE_CLUSTERS = 20
_SECRET_WORDS = ("secret", "password", "token", "key", "credential")


class ConfigWarning(UserWarning):
    """A setting that works but is probably not what the user wants."""


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"config key {key} must be one of {', '.join(allowed)}, not {value!r}")


def _within(key: str, value: float, lo: float, hi: float) -> None:
    if not lo <= value <= hi or (isinstance(value, float) and math.isnan(value)):
        raise UsageError(f"config key {key} must be in {lo}..{hi}, not {value}")


def _open_unit(key: str, value: float) -> None:
    if not 0.0 < value < 1.0 or math.isnan(value):
        raise UsageError(f"config key {key} must be strictly between 0 and 1, not {value}")


@dataclasses.dataclass(frozen=True)
class InputConfig:
    format: str = "auto"
    id_col: str = "id"
    text_col: str = "text"
    csv_header: bool = True
    malformed: str = "fail"

    def __post_init__(self) -> None:
        _choice("input.format", self.format, FORMATS)
        _choice("input.malformed", self.malformed, MALFORMED)
        if not self.id_col or not self.text_col:
            raise UsageError("config keys input.id_col and input.text_col must not be empty")
        if self.id_col == self.text_col:
            raise UsageError("config keys input.id_col and input.text_col name the same column")


@dataclasses.dataclass(frozen=True)
class NormalizeConfig:
    lowercase: bool = True
    strip_punctuation: bool = False


@dataclasses.dataclass(frozen=True)
class ShingleConfig:
    unit: str = "word"
    ngram: int = 5
    char_ngram: int = 5

    def __post_init__(self) -> None:
        _choice("shingle.unit", self.unit, UNITS)
        _within("shingle.ngram", self.ngram, 1, 64)
        _within("shingle.char_ngram", self.char_ngram, 1, 64)


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    method: str = "oph"
    num_perm: int = 128
    seed: int = 42

    def __post_init__(self) -> None:
        _choice("minhash.method", self.method, METHODS)
        _within("minhash.num_perm", self.num_perm, 1, 4096)
        _within("minhash.seed", self.seed, 0, 2**63 - 1)


@dataclasses.dataclass(frozen=True)
class LshConfig:
    threshold: float = 0.8
    bands: int | None = None
    rows: int | None = None
    false_positive_weight: float = 0.2
    false_negative_weight: float = 0.8
    recall: float | None = 0.999
    all_pairs_up_to: int = 32
    star_rounds: int = 4
    split_buckets_over: int | None = None  # None: a task's share of the band rows

    def __post_init__(self) -> None:
        _open_unit("lsh.threshold", self.threshold)
        if self.recall is not None:
            _open_unit("lsh.recall", self.recall)
        _within("lsh.false_positive_weight", self.false_positive_weight, 0.0, 1.0)
        _within("lsh.false_negative_weight", self.false_negative_weight, 0.0, 1.0)
        if self.false_positive_weight + self.false_negative_weight <= 0:
            raise UsageError("config keys lsh.false_positive_weight and false_negative_weight are both 0")
        for key in ("bands", "rows"):
            v = getattr(self, key)
            if v is not None and v < 1:
                raise UsageError(f"config key lsh.{key} must be at least 1, not {v}")
        _within("lsh.all_pairs_up_to", self.all_pairs_up_to, 1, 1024)
        _within("lsh.star_rounds", self.star_rounds, 0, 64)
        if self.split_buckets_over is not None:
            # A bucket spread over tasks is never gathered, so it must be a star.
            _within("lsh.split_buckets_over", self.split_buckets_over, self.all_pairs_up_to, 2**40)


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    method: str = "exact"
    threshold: float | None = None
    split_stars_over: int | None = None  # None: a task's share of the candidates' ends

    def __post_init__(self) -> None:
        _choice("verify.method", self.method, VERIFY_METHODS)
        t = self.threshold
        if t is not None and (not 0.0 < t <= 1.0 or math.isnan(t)):
            raise UsageError(f"config key verify.threshold must be in (0, 1], not {t}")
        if self.split_stars_over is not None:
            _within("verify.split_stars_over", self.split_stars_over, 1, 2**40)


@dataclasses.dataclass(frozen=True)
class GuardConfig:
    enabled: bool = True
    threshold: float | None = None  # None: the verify threshold minus 0.1
    max_rounds: int = 20

    def __post_init__(self) -> None:
        t = self.threshold
        if t is not None and (not 0.0 < t <= 1.0 or math.isnan(t)):
            raise UsageError(f"config key guard.threshold must be in (0, 1], not {t}")
        _within("guard.max_rounds", self.max_rounds, 1, 1000)


@dataclasses.dataclass(frozen=True)
class ComponentsConfig:
    backend: str = "auto"
    max_iterations: int = 60
    graphframes_package: str | None = None  # Maven coordinate; None: the one for this Spark

    def __post_init__(self) -> None:
        _choice("components.backend", self.backend, BACKENDS)
        if self.max_iterations < 1:
            raise UsageError("config key components.max_iterations must be at least 1")


@dataclasses.dataclass(frozen=True)
class SurvivorConfig:
    policy: str = "longest"
    column: str | None = None  # earliest / quality read it, as the policy or as survivor.then
    # priority: the column whose values are ranked, and their order, best first. A column of
    # its own, not survivor.column: priority with then: quality reads both at once.
    priority_column: str | None = None
    priority: tuple[str, ...] = ()
    then: str = "longest"  # breaks priority's ties (before the smallest id)

    def __post_init__(self) -> None:
        _choice("survivor.policy", self.policy, POLICIES)
        _choice("survivor.then", self.then, THEN_POLICIES)
        # Values are compared as text (the column's value cast to a string), so YAML
        # integers are kept as their digits; a list given to dataclasses.replace too.
        object.__setattr__(self, "priority", _priority_values(self.priority))
        if self.policy == "quality" and not self.column:
            raise UsageError("config key survivor.column is required when survivor.policy is quality")
        if self.policy != PRIORITY:
            return
        if not self.priority_column:
            raise UsageError(
                "config key survivor.priority_column is required when survivor.policy is priority"
            )
        if not self.priority:
            raise UsageError(
                "config key survivor.priority must list at least one value when survivor.policy is priority"
            )
        if self.then == "quality" and not self.column:
            raise UsageError("config key survivor.column is required when survivor.then is quality")


def _priority_values(values: Any) -> tuple[str, ...]:
    """survivor.priority as a tuple of strings: a list of strings or integers, no repeats."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise UsageError(
            f"config key survivor.priority must be a list such as [wikipedia, books, web], not {values!r}"
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, str | int):
            raise UsageError(
                f"config key survivor.priority holds {v!r}: its values must be strings or integers"
                " (quote dates and decimals)"
            )
    out = tuple(str(v) for v in values)
    repeated = sorted(v for v, n in Counter(out).items() if n > 1)
    if repeated:
        raise UsageError(
            f"config key survivor.priority lists {', '.join(map(repr, repeated))} more than once"
        )
    return out


@dataclasses.dataclass(frozen=True)
class OutputConfig:
    overwrite: bool = False


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    batch_size: str | None = None  # e.g. "8m"; None: derived from the heap (runtime/memory.py)

    def __post_init__(self) -> None:
        if self.batch_size is None:
            return
        try:
            size = parse_size(self.batch_size)
        except ValueError:
            raise UsageError(
                f"config key memory.batch_size must be a size such as 8m or 1048576, not {self.batch_size!r}"
            ) from None
        if not 64 * KiB <= size <= GiB:
            raise UsageError(f"config key memory.batch_size must be in 64k..1g, not {self.batch_size}")


@dataclasses.dataclass(frozen=True)
class ReportConfig:
    html: bool = True
    sample_clusters: int = 4
    seed: int = 42

    def __post_init__(self) -> None:
        _within("report.sample_clusters", self.sample_clusters, 0, MAX_SAMPLE_CLUSTERS)
        _within("report.seed", self.seed, 0, 2**63 - 1)


@dataclasses.dataclass(frozen=True)
class DecontaminateConfig:
    """`neardup decontaminate`: what removes a corpus document, and how the reference
    (the evaluation sets) is read and bounded."""

    ngram_matching: bool = True
    ngram: int = 13
    near_duplicates: bool = True
    threshold: float | None = None  # None: the verify threshold
    verify: str = "exact"
    reference_format: str = "auto"
    reference_id_col: str | None = None  # None: input.id_col
    reference_text_col: str | None = None  # None: input.text_col
    max_reference_bytes: str = "32m"

    def __post_init__(self) -> None:
        if not self.ngram_matching and not self.near_duplicates:
            raise UsageError(
                "config keys decontaminate.ngram_matching and decontaminate.near_duplicates are both "
                "false: nothing would be removed"
            )
        _within("decontaminate.ngram", self.ngram, 1, 1000)
        t = self.threshold
        if t is not None and (not 0.0 < t <= 1.0 or math.isnan(t)):
            raise UsageError(f"config key decontaminate.threshold must be in (0, 1], not {t}")
        _choice("decontaminate.verify", self.verify, DECON_VERIFY)
        _choice("decontaminate.reference_format", self.reference_format, REFERENCE_FORMATS)
        for key in ("reference_id_col", "reference_text_col"):
            if getattr(self, key) == "":
                raise UsageError(f"config key decontaminate.{key} must not be empty (null: the input's)")
        try:
            size = parse_size(self.max_reference_bytes)
        except ValueError:
            raise UsageError(
                "config key decontaminate.max_reference_bytes must be a size such as 32m, "
                f"not {self.max_reference_bytes!r}"
            ) from None
        if not KiB <= size <= 2 * GiB:
            raise UsageError(
                "config key decontaminate.max_reference_bytes must be in 1k..2g, "
                f"not {self.max_reference_bytes}"
            )

    def reference_columns(self, inp: InputConfig) -> tuple[str, str]:
        """The reference's (id, text) columns: its own keys, else the input's."""
        return self.reference_id_col or inp.id_col, self.reference_text_col or inp.text_col


@dataclasses.dataclass(frozen=True)
class Config:
    """The resolved configuration. `bands`/`rows` are always set once built."""

    input: InputConfig
    normalize: NormalizeConfig
    shingle: ShingleConfig
    minhash: MinHashConfig
    lsh: LshConfig
    verify: VerifyConfig
    components: ComponentsConfig
    guard: GuardConfig
    survivor: SurvivorConfig
    output: OutputConfig
    memory: MemoryConfig
    report: ReportConfig
    spark: Mapping[str, str]
    decontaminate: DecontaminateConfig = dataclasses.field(default_factory=DecontaminateConfig)

    def __post_init__(self) -> None:
        b, r, k = self.lsh.bands, self.lsh.rows, self.minhash.num_perm
        if b is not None and r is not None and b * r > k:
            raise UsageError(
                f"config keys lsh.bands * lsh.rows = {b} * {r} = {b * r} exceeds minhash.num_perm = {k}"
            )
        if self.survivor.column is not None and self.survivor.column == self.input.text_col:
            raise UsageError("config key survivor.column must not be the text column")
        if self.survivor.priority_column is not None and self.survivor.priority_column == self.input.text_col:
            raise UsageError("config key survivor.priority_column must not be the text column")
        ref_id, ref_text = self.decontaminate.reference_columns(self.input)
        if ref_id == ref_text:
            raise UsageError(
                f"config keys decontaminate.reference_id_col and reference_text_col name the same column "
                f"{ref_id!r} (null means input.id_col and input.text_col)"
            )

    @property
    def bands(self) -> int:
        assert self.lsh.bands is not None
        return self.lsh.bands

    @property
    def rows(self) -> int:
        assert self.lsh.rows is not None
        return self.lsh.rows

    @property
    def batch_bytes(self) -> int | None:
        size = self.memory.batch_size
        return None if size is None else parse_size(size)

    @property
    def verify_threshold(self) -> float:
        t = self.verify.threshold
        return self.lsh.threshold if t is None else t

    @property
    def decontaminate_threshold(self) -> float | None:
        """The near-duplicate threshold of `neardup decontaminate`; None when that matching is off."""
        if not self.decontaminate.near_duplicates:
            return None
        t = self.decontaminate.threshold
        return self.verify_threshold if t is None else t

    @property
    def guard_threshold(self) -> float | None:
        """The over-merge guard's threshold; None when the guard is off (or cannot score:
        verify.method none keeps no similarities)."""
        if not self.guard.enabled or self.verify.method == "none":
            return None
        t = self.guard.threshold
        return round(max(self.verify_threshold - 0.1, 0.0), 6) if t is None else t

    def footguns(self, bands_chosen: bool = True) -> list[str]:
        """Settings that work but are probably a mistake, one sentence each. `bands_chosen`:
        the user set lsh.bands or lsh.rows (derived ones are what the derivation wants)."""
        found = []
        k, t = self.minhash.num_perm, self.lsh.threshold
        if bands_chosen and self.lsh.bands is not None and self.lsh.rows is not None:
            used = self.bands * self.rows
            if used < k // 2:
                found.append(
                    f"lsh.bands x lsh.rows = {used} uses {used} of minhash.num_perm = {k} slots: "
                    "the rest are computed for nothing; lower num_perm or raise bands"
                )
            p = float(candidate_probability(t, self.bands, self.rows))
            if p < 0.5:
                found.append(
                    f"with {self.bands} x {self.rows} bands a pair at lsh.threshold = {t} becomes a "
                    f"candidate with probability {p:.2f}: most such pairs will be missed"
                )
        if self.verify.method == "none" and t < 0.9:
            found.append(
                f"verify.method = none at lsh.threshold = {t}: unverified band collisions chained by "
                "connected components make giant false clusters; use exact or signature"
            )
        if (
            self.guard.enabled
            and self.guard.threshold is not None
            and self.guard.threshold > self.verify_threshold
        ):
            found.append(
                f"guard.threshold = {self.guard.threshold} is above the verify threshold "
                f"{self.verify_threshold}: the guard splits off members that verification joined directly"
            )
        s = self.survivor
        if s.policy != PRIORITY and (s.priority_column or s.priority or s.then != "longest"):
            found.append(
                "survivor.priority_column, survivor.priority and survivor.then are read only when "
                f"survivor.policy is priority, and it is {s.policy}"
            )
        dt = self.decontaminate_threshold if self.decontaminate.threshold is not None else None
        if dt is not None and (p := float(candidate_probability(dt, self.bands, self.rows))) < 0.9:
            found.append(
                f"decontaminate.threshold = {dt} with {self.bands} x {self.rows} bands (chosen for "
                f"lsh.threshold = {t}): a reference copy at {dt} becomes a candidate with probability "
                f"{p:.2f} only; set lsh.threshold to {dt} as well"
            )
        if self.verify.method == "signature" and k < 64:
            found.append(
                f"verify.method = signature with minhash.num_perm = {k}: the estimate is off by more "
                "than 0.1 at J = 0.8 for one pair in twenty; use exact, or 128 slots"
            )
        return found

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        """Plain data for report.json; Spark settings that look like credentials are masked."""
        d = dataclasses.asdict(self)
        d["spark"] = {k: (REDACTED if redact and is_secret(k) else v) for k, v in self.spark.items()}
        return d


def is_secret(name: str) -> bool:
    """A setting whose name suggests a credential (s3a access keys, tokens, passwords)."""
    lower = name.lower()
    return any(w in lower for w in _SECRET_WORDS)


_SECTIONS: dict[str, type] = {
    "input": InputConfig,
    "normalize": NormalizeConfig,
    "shingle": ShingleConfig,
    "minhash": MinHashConfig,
    "lsh": LshConfig,
    "verify": VerifyConfig,
    "components": ComponentsConfig,
    "guard": GuardConfig,
    "survivor": SurvivorConfig,
    "output": OutputConfig,
    "memory": MemoryConfig,
    "report": ReportConfig,
    "decontaminate": DecontaminateConfig,
}


def default_layer() -> dict[str, Any]:
    text = resources.files("neardup").joinpath("conf/default.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def read_layer(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"config file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise UsageError(f"config file {p}{line} is not valid YAML") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config file {p} must hold a mapping of sections, not {type(data).__name__}")
    return data


def parse_set(item: str) -> tuple[str, Any]:
    """`section.key=value` -> (dotted key, YAML-typed value)."""
    if "=" not in item:
        raise UsageError(f"--set {item!r} must look like KEY=VALUE")
    key, raw = item.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise UsageError(f"--set {key}: value {raw!r} is not valid YAML") from e
    return key, value


def merge(base: dict[str, Any], layer: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """Deep-merge `layer` into a copy of `base`; keys unknown to `base` are errors."""
    out = copy.deepcopy(base)
    for section, values in layer.items():
        if section not in out:
            raise UsageError(f"unknown config section {section!r} in {origin}")
        if section == "spark":
            if not isinstance(values, Mapping):
                raise UsageError(f"config key spark in {origin} must be a mapping")
            out["spark"] = {**out["spark"], **{str(k): _spark_value(v) for k, v in values.items()}}
            continue
        if not isinstance(values, Mapping):
            raise UsageError(f"config section {section!r} in {origin} must be a mapping")
        for key, value in values.items():
            if key not in out[section]:
                raise UsageError(f"unknown config key {section}.{key} in {origin}")
            out[section][key] = value
    return out


def _spark_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def set_to_layer(key: str, value: Any) -> dict[str, Any]:
    parts = key.split(".")
    if parts[0] == "spark" and len(parts) > 1:
        return {"spark": {".".join(parts[1:]): value}}
    if len(parts) != 2:
        raise UsageError(f"--set key {key!r} must be SECTION.KEY (e.g. lsh.threshold)")
    return {parts[0]: {parts[1]: value}}


def load(
    config_files: Iterable[str] = (),
    sets: Iterable[str] = (),
    spark_conf: Iterable[str] = (),
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the frozen Config from the layers (see module docstring)."""
    data = default_layer()
    for f in config_files:
        data = merge(data, read_layer(f), f)
    for item in sets:
        key, value = parse_set(item)
        data = merge(data, set_to_layer(key, value), f"--set {key}")
    for item in spark_conf:
        if "=" not in item:
            raise UsageError(f"--conf {item!r} must look like SPARK_KEY=VALUE")
        k, v = item.split("=", 1)
        data = merge(data, {"spark": {k.strip(): v}}, f"--conf {k}")
    if overrides:
        data = merge(data, overrides, "the command line")
    return build(data)


def build(data: Mapping[str, Any]) -> Config:
    """The Config of merged layers: values typed, sections checked, bands resolved, and a
    `ConfigWarning` for each footgun."""
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        values = dict(data.get(name) or {})
        for f in dataclasses.fields(cls):
            if f.name in values:
                values[f.name] = _coerce(f"{name}.{f.name}", values[f.name], f.type)
        sections[name] = cls(**values)
    chosen = sections["lsh"].bands is not None or sections["lsh"].rows is not None
    cfg = _resolve_bands(Config(spark=dict(data.get("spark") or {}), **sections))
    for message in cfg.footguns(bands_chosen=chosen):
        warnings.warn(message, ConfigWarning, stacklevel=2)
    return cfg


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    ann = str(annotation)
    optional = "None" in ann
    if value is None:
        if optional:
            return None
        raise UsageError(f"config key {key} must not be null")
    if ann.startswith("bool"):
        if not isinstance(value, bool):
            raise UsageError(f"config key {key} must be true or false, not {value!r}")
        return value
    if ann.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"config key {key} must be an integer, not {value!r}")
        return value
    if ann.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"config key {key} must be a number, not {value!r}")
        return float(value)
    if ann.startswith("str"):
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a size in bytes written as a number
        if not isinstance(value, str):
            raise UsageError(f"config key {key} must be a string, not {value!r}")
        return value
    return value


def _resolve_bands(cfg: Config) -> Config:
    b, r = cfg.lsh.bands, cfg.lsh.rows
    k = cfg.minhash.num_perm
    if b is None and r is None and cfg.lsh.recall is not None:
        found = bands_for_recall(cfg.lsh.threshold, k, cfg.lsh.recall)
        if found is None:
            raise UsageError(
                f"no lsh.bands x lsh.rows within minhash.num_perm={k} reaches lsh.recall={cfg.lsh.recall} "
                f"at lsh.threshold={cfg.lsh.threshold}; lower the recall or raise num_perm"
            )
        b, r = found
    elif b is None and r is None:
        b, r = optimal_bands(
            cfg.lsh.threshold, k, cfg.lsh.false_positive_weight, cfg.lsh.false_negative_weight
        )
    elif b is None:
        assert r is not None
        b = k // r
    elif r is None:
        r = k // b
    if b < 1 or r < 1 or b * r > k:
        raise UsageError(f"config keys lsh.bands={b}, lsh.rows={r} do not fit minhash.num_perm={k}")
    return dataclasses.replace(cfg, lsh=dataclasses.replace(cfg.lsh, bands=b, rows=r))
