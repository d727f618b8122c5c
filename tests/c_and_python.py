"""The C helpers and their Python fallbacks, side by side in tests.

A fixture parametrized over ``IMPLEMENTATIONS`` runs a test with each; its "c" case takes the
helper from ``c_helper``, which skips where the helper is not in use: not built, or
``COMMITGATE_NO_C=1`` (tests/test_without_c_helpers.py runs the suites so once more).
"""
from __future__ import annotations

from types import ModuleType

import pytest

from commitgate import c_helpers

IMPLEMENTATIONS = ("c", "python")


def c_helper(name: str) -> ModuleType:
    """The C helper ``commitgate.<name>``, or skip the test."""
    module = c_helpers.load(name)
    if module is None:
        pytest.skip(f"commitgate.{name} is not in use (not built, or {c_helpers.SWITCH}=1)")
    return module
