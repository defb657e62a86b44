"""String ids give what int ids give: the same corpus, run with its int64 ids and with the
ids cast to strings, has the same outputs.

Two kinds of string ids. Zero-padded decimals (`doc-00000000000000001000`) order as the
integers do, so every output (clusters/, kept/, rejected/) must be the int run's, whole,
once its ids are mapped. Ids shaped like real ones (URLs, 40-hex hashes, object-store
paths: neardup_testkit/string_ids.py) order otherwise, and the survivor policy's ties go to
the smallest id: the clusters, as sets of documents, must be the int run's, and each kept
document the best of its cluster by the policy (the longest, then the smallest id), computed
here from the texts.

The corpora: the guard's chains (its rounds split clusters on the driver, the nearest step
moves documents) and a generated corpus with exact copies (the exact stage's groups, the
cluster sizes). The driver paths these runs take are the ones whose numpy sorts and
membership tests were slow for strings (kernels/id_arrays.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup import config
from neardup.commands.dedup import run
from neardup_testkit import chains
from neardup_testkit.string_ids import string_ids
from neardup_testkit.synth import CorpusSpec, generate

OUTPUTS = ("clusters", "kept", "rejected")


def _padded(ids: np.ndarray) -> pa.Array:
    return pa.array([f"doc-{i:020d}" for i in ids.tolist()], pa.string())


def _corpus(name: str) -> pa.Table:
    if name == "chains":
        return chains.generate(chains.ChainSpec())
    return generate(
        CorpusSpec(num_docs=1200, seed=3, mean_chars=400, dup_fraction=0.5, exact_copy_fraction=0.3)
    )


def _run(spark: Any, table: pa.Table, root: Path, name: str) -> dict[str, pa.Table]:
    path = root / f"{name}.parquet"
    pq.write_table(table, path)
    out = root / name
    run(spark, config.load(sets=["report.html=false"]), str(path), str(out))
    return {o: pq.read_table(out / o) for o in OUTPUTS}


def _mapped(
    tables: dict[str, pa.Table], to: Callable[[np.ndarray], pa.Array]
) -> dict[str, list[dict[str, Any]]]:
    """The int run's outputs with every id column mapped by `to`, rows sorted by id."""
    out = {}
    for name, t in tables.items():
        for col in ("id", "cluster_id"):
            if col in t.column_names:
                values = t.column(col).to_numpy(zero_copy_only=False)
                nulls = np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), bool)
                ints = np.where(nulls, 0, values).astype(np.int64)
                mapped = to(ints).to_pylist()
                mapped = [None if n else v for v, n in zip(mapped, nulls.tolist(), strict=True)]
                at = t.schema.get_field_index(col)
                t = t.set_column(
                    at,
                    pa.field(col, pa.string(), t.schema.field(col).nullable),
                    pa.array(mapped, pa.string()),
                )
        out[name] = sorted(t.to_pylist(), key=lambda r: r["id"])
    return out


def _rows(tables: dict[str, pa.Table]) -> dict[str, list[dict[str, Any]]]:
    return {name: sorted(t.to_pylist(), key=lambda r: r["id"]) for name, t in tables.items()}


@pytest.fixture(scope="module", params=["chains", "synth"])
def runs(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, Any]:
    table = _corpus(request.param)
    root = tmp_path_factory.mktemp(f"string-ids-{request.param}")
    ids = table.column("id").to_numpy()
    at = table.schema.get_field_index("id")
    field = pa.field("id", pa.string(), False)
    got: dict[str, Any] = {"name": request.param, "table": table, "int": _run(spark, table, root, "int")}
    # Every chain document has the same length: its survivors are the smallest ids, which
    # ids in another order change, and the guard's splits with them. So the chains get ids
    # in the ints' order (outputs compared whole), the generated corpus, whose lengths vary,
    # real-shaped ones (a run each: the suite's time).
    if request.param == "chains":
        got["padded"] = _run(spark, table.set_column(at, field, _padded(ids)), root, "padded")
    else:
        got["real"] = _run(spark, table.set_column(at, field, string_ids(ids)), root, "real")
    return got


def test_ids_in_the_same_order_give_the_same_outputs(runs: dict[str, Any]) -> None:
    if "padded" not in runs:
        pytest.skip("ids in the ints' order on the chains corpus only (see the fixture)")
    assert _rows(runs["padded"]) == _mapped(runs["int"], _padded)


def _clusters(tables: dict[str, pa.Table], name: Callable[[Any], str]) -> dict[str, frozenset[str]]:
    """kept id -> the cluster's members (kept one included), ids named by `name`."""
    groups: dict[str, set[str]] = {}
    for r in tables["clusters"].select(["id", "cluster_id"]).to_pylist():
        kept = r["cluster_id"] if r["cluster_id"] is not None else r["id"]
        groups.setdefault(name(kept), set()).add(name(r["id"]))
    return {kept: frozenset(m) for kept, m in groups.items()}


def test_ids_like_real_ones_give_the_same_clusters_and_as_long_survivors(runs: dict[str, Any]) -> None:
    if "real" not in runs:
        pytest.skip("real-shaped ids on the generated corpus only (see the fixture)")
    table = runs["table"]
    ints = table.column("id").to_numpy()
    strings = string_ids(ints).to_pylist()
    length = dict(zip(strings, map(len, table.column("text").to_pylist()), strict=True))
    to_string = dict(zip(ints.tolist(), strings, strict=True))
    by_int = _clusters(runs["int"], lambda i: to_string[int(i)])
    by_string = _clusters(runs["real"], str)
    assert sorted(map(sorted, by_string.values())) == sorted(map(sorted, by_int.values()))
    assert sum(len(m) > 1 for m in by_int.values()) > 100
    # The policy (longest, then the smallest id): the same length kept, the smallest id
    # among the longest; a removed document never longer than its kept one.
    kept_of = {m: k for k, m in by_int.items()}
    for kept, group in by_string.items():
        assert length[kept] == length[kept_of[group]]
        assert kept == min(i for i in group if length[i] == length[kept])
        assert max(length[i] for i in group) == length[kept]
    assert {r["id"] for r in runs["real"]["kept"].select(["id"]).to_pylist()} == set(by_string)
