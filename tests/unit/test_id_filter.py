"""The approximate id set of exact verification's text filter, against Python sets."""

from __future__ import annotations

import numpy as np

from neardup.kernels.id_filter import fingerprints, id_set, may_contain


def test_members_always_pass_and_others_only_on_a_shared_fingerprint() -> None:
    rng = np.random.default_rng(5)
    members = rng.integers(-(2**63), 2**63 - 1, size=20_000, dtype=np.int64)
    others = rng.integers(-(2**63), 2**63 - 1, size=200_000, dtype=np.int64)
    # A non-member with a member's top 32 bits (a fingerprint collision) passes too.
    twin = (members[:5].view(np.uint64) ^ np.uint64(0xFFFF)).view(np.int64)
    payload = id_set(fingerprints(np.concatenate([members, members[:100]])))  # repeats are one member
    assert len(payload) == 4 * len(set(fingerprints(members).tolist()))
    # Spark casts the fingerprints to int: the same bit patterns, the same set.
    assert id_set(fingerprints(members).view(np.int32)) == payload
    assert may_contain(payload, members).all()
    assert may_contain(payload, twin).all()
    prints = set(fingerprints(members).tolist())
    want = np.array([f in prints for f in fingerprints(others).tolist()])
    assert (may_contain(payload, others) == want).all()
    assert want.sum() < 20  # about 20,000 / 2**32 of 200,000


def test_empty_set_holds_nothing() -> None:
    empty = id_set(np.empty(0, dtype=np.int32))
    assert not may_contain(empty, np.array([0, -1, 7], dtype=np.int64)).any()
    assert may_contain(empty, np.empty(0, dtype=np.int64)).shape == (0,)
