"""The C helpers and their Python fallbacks, side by side in tests.

A test runs with each of ``IMPLEMENTATIONS``: its "c" case takes the helper from ``c_helper``
(or ``implementations``), which skips where the helper is not in use: not built, or
``COMMITGATE_NO_C=1`` (tests/test_without_c_helpers.py runs the suites so once more).
"""
from __future__ import annotations

from types import ModuleType

import pytest

from commitgate.native import c_helpers

IMPLEMENTATIONS = ("c", "python")


def _not_in_use(name: str) -> str:
    return f"commitgate.{name} is not in use (not built, or {c_helpers.SWITCH}=1)"


def c_helper(name: str) -> ModuleType:
    """The C helper ``commitgate.<name>``, or skip the test (or the module, at its top)."""
    module = c_helpers.load(name)
    if module is None:
        pytest.skip(_not_in_use(name), allow_module_level=True)
    return module


def implementations(name: str, attribute: str, python: object) -> list:
    """Parameters "c" (``attribute`` of the C helper ``name``) and "python" (``python``)."""
    module = c_helpers.load(name)
    skip = pytest.mark.skipif(module is None, reason=_not_in_use(name))
    return [pytest.param(getattr(module, attribute, None), id="c", marks=skip),
            pytest.param(python, id="python")]
