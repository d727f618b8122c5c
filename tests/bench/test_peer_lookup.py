"""Peers are found in the benchmark's own environment even when it is not activated."""
from __future__ import annotations

import sysconfig
from pathlib import Path

from commitgate.bench.targets import installed


def test_a_console_script_of_this_environment_is_found_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # as when .venv/bin/commitgate runs by its path
    found = installed("commitgate")  # a console script of this project's own install
    assert found is not None
    assert Path(found).parent == Path(sysconfig.get_paths()["scripts"])
    assert installed("no-such-peer-binary") is None
