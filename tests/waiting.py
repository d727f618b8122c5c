"""Waiting on a condition with a deadline: tests never sleep a fixed time instead."""
from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = 60.0,
               interval_s: float = 0.1) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {deadline_s:.0f} s waiting for {what}"
        time.sleep(interval_s)
