"""The run's configuration: YAML layers merged, checked, frozen.

Layers, later wins: the packaged `default.yaml` < each `--config FILE` < each
`--set KEY=VALUE`. Every key must exist in the defaults, so a typo is an error
(exit 2) rather than a silently ignored setting. Values are checked for range
and for rules that span fields (b * r <= num_perm) before any Spark work starts.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from neardup.errors import UsageError
from neardup.memory import GiB, KiB, parse_size

FORMATS = ("auto", "parquet", "jsonl", "csv", "table")
UNITS = ("word", "char")
METHODS = ("classic", "oph")
VERIFY_METHODS = ("signature", "exact", "none")
BACKENDS = ("auto", "graphframes", "builtin")
POLICIES = ("longest", "earliest", "quality")


@dataclasses.dataclass(frozen=True)
class InputConfig:
    format: str = "auto"
    id_col: str = "id"
    text_col: str = "text"
    csv_header: bool = True


@dataclasses.dataclass(frozen=True)
class NormalizeConfig:
    lowercase: bool = True
    strip_punctuation: bool = False


@dataclasses.dataclass(frozen=True)
class ShingleConfig:
    unit: str = "word"
    ngram: int = 5
    char_ngram: int = 5


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    method: str = "oph"
    num_perm: int = 128
    seed: int = 42


@dataclasses.dataclass(frozen=True)
class LshConfig:
    threshold: float = 0.8
    bands: int | None = None
    rows: int | None = None
    false_positive_weight: float = 0.2
    false_negative_weight: float = 0.8
    recall: float | None = 0.999
    all_pairs_up_to: int = 32


@dataclasses.dataclass(frozen=True)
class VerifyConfig:
    method: str = "exact"
    threshold: float | None = None


@dataclasses.dataclass(frozen=True)
class ComponentsConfig:
    backend: str = "auto"
    max_iterations: int = 60


@dataclasses.dataclass(frozen=True)
class SurvivorConfig:
    policy: str = "longest"
    column: str | None = None


@dataclasses.dataclass(frozen=True)
class OutputConfig:
    overwrite: bool = False


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    batch_size: str | None = None  # e.g. "8m"; None: derived from the heap (memory.py)


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
    survivor: SurvivorConfig
    output: OutputConfig
    memory: MemoryConfig
    spark: Mapping[str, str]

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

    def to_dict(self, redact: bool = True) -> dict[str, Any]:
        """Plain data for report.json; Spark settings that look like credentials are masked."""
        d = dataclasses.asdict(self)
        d["spark"] = {k: (REDACTED if redact and is_secret(k) else v) for k, v in self.spark.items()}
        return d


REDACTED = "*** redacted ***"
_SECRET_WORDS = ("secret", "password", "token", "key", "credential")


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
    "survivor": SurvivorConfig,
    "output": OutputConfig,
    "memory": MemoryConfig,
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
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        values = dict(data.get(name) or {})
        for f in dataclasses.fields(cls):
            if f.name in values:
                values[f.name] = _coerce(f"{name}.{f.name}", values[f.name], f.type)
        sections[name] = cls(**values)
    cfg = Config(spark=dict(data.get("spark") or {}), **sections)
    return _resolve_bands(validate(cfg))


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


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"config key {key} must be one of {', '.join(allowed)}, not {value!r}")


def validate(cfg: Config) -> Config:
    """Range and cross-field checks; each raises UsageError naming the key."""
    _choice("input.format", cfg.input.format, FORMATS)
    _choice("shingle.unit", cfg.shingle.unit, UNITS)
    _choice("minhash.method", cfg.minhash.method, METHODS)
    _choice("verify.method", cfg.verify.method, VERIFY_METHODS)
    _choice("components.backend", cfg.components.backend, BACKENDS)
    _choice("survivor.policy", cfg.survivor.policy, POLICIES)
    if not cfg.input.id_col or not cfg.input.text_col:
        raise UsageError("config keys input.id_col and input.text_col must not be empty")
    if cfg.input.id_col == cfg.input.text_col:
        raise UsageError("config keys input.id_col and input.text_col name the same column")
    if not 1 <= cfg.shingle.ngram <= 64:
        raise UsageError(f"config key shingle.ngram must be in 1..64, not {cfg.shingle.ngram}")
    if not 1 <= cfg.shingle.char_ngram <= 64:
        raise UsageError(f"config key shingle.char_ngram must be in 1..64, not {cfg.shingle.char_ngram}")
    if not 1 <= cfg.minhash.num_perm <= 4096:
        raise UsageError(f"config key minhash.num_perm must be in 1..4096, not {cfg.minhash.num_perm}")
    if not 0 <= cfg.minhash.seed < 2**63:
        raise UsageError(f"config key minhash.seed must be in 0..2^63-1, not {cfg.minhash.seed}")
    t = cfg.lsh.threshold
    if not (0.0 < t < 1.0) or math.isnan(t):
        raise UsageError(f"config key lsh.threshold must be strictly between 0 and 1, not {t}")
    vt = cfg.verify.threshold
    if vt is not None and not (0.0 < vt <= 1.0):
        raise UsageError(f"config key verify.threshold must be in (0, 1], not {vt}")
    for key in ("false_positive_weight", "false_negative_weight"):
        w = getattr(cfg.lsh, key)
        if not 0.0 <= w <= 1.0:
            raise UsageError(f"config key lsh.{key} must be in [0, 1], not {w}")
    rc = cfg.lsh.recall
    if rc is not None and (not 0.0 < rc < 1.0 or math.isnan(rc)):
        raise UsageError(f"config key lsh.recall must be strictly between 0 and 1, not {rc}")
    if cfg.lsh.false_positive_weight + cfg.lsh.false_negative_weight <= 0:
        raise UsageError("config keys lsh.false_positive_weight and false_negative_weight are both 0")
    b, r = cfg.lsh.bands, cfg.lsh.rows
    for key, v in (("bands", b), ("rows", r)):
        if v is not None and v < 1:
            raise UsageError(f"config key lsh.{key} must be at least 1, not {v}")
    if b is not None and r is not None and b * r > cfg.minhash.num_perm:
        raise UsageError(
            f"config keys lsh.bands * lsh.rows = {b} * {r} = {b * r} exceeds "
            f"minhash.num_perm = {cfg.minhash.num_perm}"
        )
    if not 1 <= cfg.lsh.all_pairs_up_to <= 1024:
        raise UsageError(f"config key lsh.all_pairs_up_to must be in 1..1024, not {cfg.lsh.all_pairs_up_to}")
    if cfg.components.max_iterations < 1:
        raise UsageError("config key components.max_iterations must be at least 1")
    if cfg.survivor.policy == "quality" and not cfg.survivor.column:
        raise UsageError("config key survivor.column is required when survivor.policy is quality")
    if cfg.memory.batch_size is not None:
        try:
            size = parse_size(cfg.memory.batch_size)
        except ValueError:
            raise UsageError(
                f"config key memory.batch_size must be a size such as 8m or 1048576, "
                f"not {cfg.memory.batch_size!r}"
            ) from None
        if not 64 * KiB <= size <= GiB:
            raise UsageError(f"config key memory.batch_size must be in 64k..1g, not {cfg.memory.batch_size}")
    if cfg.survivor.column in (cfg.input.text_col,):
        raise UsageError("config key survivor.column must not be the text column")
    return cfg


def _resolve_bands(cfg: Config) -> Config:
    from neardup.bands import bands_for_recall, optimal_bands

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
            cfg.lsh.threshold,
            k,
            cfg.lsh.false_positive_weight,
            cfg.lsh.false_negative_weight,
        )
    elif b is None:
        assert r is not None
        b = k // r
    elif r is None:
        r = k // b
    if b < 1 or r < 1 or b * r > k:
        raise UsageError(f"config keys lsh.bands={b}, lsh.rows={r} do not fit minhash.num_perm={k}")
    return dataclasses.replace(cfg, lsh=dataclasses.replace(cfg.lsh, bands=b, rows=r))
