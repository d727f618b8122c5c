"""The optional C helpers, and the one switch that turns them off.

Each helper (``HELPERS``) has a pure-Python fallback that makes the same checks with the same
answers; ``load`` gives the helper, or None where it was not built or ``COMMITGATE_NO_C=1`` is
set, so that one run can test the fallbacks on a machine that built the helpers. It lives in
``native/``, below both ``protocol/`` and ``engine/``, so that neither imports the other.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TypeVar

SWITCH = "COMMITGATE_NO_C"
HELPERS = ("protocol._record_keys", "engine._commit_log", "engine._queue_core")
T = TypeVar("T")


def disabled() -> bool:
    """True when ``COMMITGATE_NO_C`` is set to anything but empty or 0."""
    return os.environ.get(SWITCH, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The C helper ``commitgate.<name>`` (e.g. ``engine._queue_core``), or None."""
    if disabled():
        return None
    try:
        return importlib.import_module(f"commitgate.{name}")
    except ImportError:  # installed without a C compiler
        return None


def pick(module: str, name: str, fallback: T) -> T:
    """``name`` from the C helper ``module`` where it is in use, else ``fallback``."""
    return getattr(load(module), name, fallback)
