"""`preloaded`: modules imported in a thread while the JVM starts, ready when it is up; a
module that fails to import there fails at the caller's own import, as it would have."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from neardup.runtime.session import preloaded


def test_modules_are_imported_in_another_thread_by_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module that records which thread imported it.
    (tmp_path / "preload_mod_a.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    (tmp_path / "preload_mod_b.py").write_text("import preload_mod_a\nVALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("preload_mod_a", "preload_mod_b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with preloaded(["preload_mod_b"]):
        pass
    assert sys.modules["preload_mod_b"].VALUE == 42
    assert sys.modules["preload_mod_a"].THREAD == "neardup-preload"
    assert threading.current_thread().name != "neardup-preload"


def test_a_failing_import_is_left_to_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('broken on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_mod", raising=False)
    with preloaded(["no_such_module_anywhere", "broken_mod"]):
        pass
    assert "broken_mod" not in sys.modules
    with pytest.raises(RuntimeError, match="broken on import"):
        import broken_mod  # noqa: F401


def test_nothing_to_load_starts_no_thread() -> None:
    before = threading.active_count()
    with preloaded([]):
        assert threading.active_count() == before
