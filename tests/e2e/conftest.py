"""Fixtures of the end-to-end tier shared by its modules."""

from __future__ import annotations

import pytest
from heavy import HeavyCorpus, build


@pytest.fixture(scope="session")
def heavy_corpus(tmp_path_factory: pytest.TempPathFactory) -> HeavyCorpus:
    """The ~1 GB heavy-tailed corpus (heavy.py), built once per test session."""
    return build(tmp_path_factory.mktemp("heavy"))
