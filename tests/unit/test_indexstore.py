"""The index's manifest and its compatibility rules, without a JVM: every parameter band
keys depend on is recorded and a difference in any one is refused naming it; the probe
catches other hashing; the survivor order puts indexed documents first."""

from __future__ import annotations

import dataclasses

import pytest

from neardup import columns as C
from neardup import config
from neardup.errors import IndexRefusedError
from neardup.kernels.policy import SortKey, survivor_order
from neardup.kernels.signatures import SignParams
from neardup.runtime.indexstore import (
    FORMAT_VERSION,
    PARAM_KEYS,
    Manifest,
    Segment,
    Texts,
    check_compatible,
    check_id_type,
    index_params,
    probe_keys,
)
from neardup.stages.sign import sign_params

PARAMS = sign_params(config.load())  # the defaults: 18 x 5 bands of 128 OPH slots, seed 42
# Another valid value of each parameter.
OTHER = {
    "lowercase": False,
    "strip_punctuation": True,
    "unit": "char",
    "ngram": 4,
    "char_ngram": 3,
    "num_perm": 96,
    "seed": 7,
    "method": "classic",
    "bands": 16,
    "rows": 6,
}


def _manifest(params: SignParams = PARAMS) -> Manifest:
    texts = Texts("file:/data/kept", "parquet", "id", "text", (("file:/data/kept/part-0.parquet", 1234, 99),))
    return Manifest(
        version=3,
        build_id="b" * 32,
        params=index_params(params),
        probe=probe_keys(params),
        id_type="bigint",
        signatures=False,
        segments=(Segment("v00000001-" + "a" * 32, 10, 11, texts),),
    )


def test_every_signing_parameter_is_recorded_under_its_config_key() -> None:
    assert set(PARAM_KEYS) == {f.name for f in dataclasses.fields(SignParams)} == set(OTHER)
    assert index_params(PARAMS) == {
        "normalize.lowercase": True,
        "normalize.strip_punctuation": False,
        "shingle.unit": "word",
        "shingle.ngram": 5,
        "shingle.char_ngram": 5,
        "minhash.method": "oph",
        "minhash.num_perm": 128,
        "minhash.seed": 42,
        "lsh.bands": 18,
        "lsh.rows": 5,
    }


def test_the_manifest_reads_back_as_written() -> None:
    m = _manifest()
    assert Manifest.from_json(m.to_json(), "here") == m
    assert m.documents == 10 and m.digest("p") == {"path": "p", "build_id": "b" * 32, "version": 3}


@pytest.mark.parametrize("name", sorted(OTHER))
def test_an_index_of_any_other_parameter_is_refused_naming_it(name: str) -> None:
    theirs = _manifest(dataclasses.replace(PARAMS, **{name: OTHER[name]}))
    key = PARAM_KEYS[name]

    def shown(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    ours, built = shown(getattr(PARAMS, name)), shown(OTHER[name])
    want = f"index /idx was built with {key}={built}, this run has {key}={ours}"
    with pytest.raises(IndexRefusedError) as caught:
        check_compatible(theirs, PARAMS, "/idx")
    assert str(caught.value) == want
    check_compatible(_manifest(), PARAMS, "/idx")  # the same parameters: accepted


def test_other_hashing_with_the_same_parameters_is_refused() -> None:
    m = dataclasses.replace(_manifest(), probe=[[k ^ 1 for k in keys] for keys in probe_keys(PARAMS)])
    with pytest.raises(IndexRefusedError, match="whose hashing gives other band keys"):
        check_compatible(m, PARAMS, "/idx")
    # The probe depends on every parameter (so it also checks what the names say).
    for name, value in OTHER.items():
        assert probe_keys(dataclasses.replace(PARAMS, **{name: value})) != probe_keys(PARAMS), name


def test_ids_of_another_type_and_other_formats_are_refused() -> None:
    with pytest.raises(
        IndexRefusedError, match=r"^index /idx holds ids of type bigint, input x's id column is string$"
    ):
        check_id_type(_manifest(), "string", "/idx", "input x")
    text = _manifest().to_json().replace(f'"format_version": {FORMAT_VERSION}', '"format_version": 99')
    with pytest.raises(IndexRefusedError, match="has index format version 99"):
        Manifest.from_json(text, "here")
    with pytest.raises(IndexRefusedError, match="not a valid index manifest"):
        Manifest.from_json('{"format": "neardup-index", "format_version": 1}', "here")
    with pytest.raises(IndexRefusedError, match="is not a neardup index manifest"):
        Manifest.from_json("{}", "here")


@pytest.mark.parametrize("policy", ["longest", "earliest", "quality"])
def test_indexed_documents_lead_every_survivor_order(policy: str) -> None:
    plain = survivor_order(policy, True)
    assert survivor_order(policy, True, prefer_index=True) == [SortKey(C.FROM_INDEX, True), *plain]
    assert plain[-1] == SortKey(C.DOC_ID, False)
