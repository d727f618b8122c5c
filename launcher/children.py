"""Child processes that die with the process that starts them.

A broker, peer or load generator started for a test or a benchmark must not outlive its starter,
however that ends: a clean exit stops it, a SIGTERM or Ctrl-C runs the starter's clean-up, and a
SIGKILL (a CI timeout) leaves the kernel to do it. On Linux the child asks for that itself between
fork and exec: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` makes the kernel kill it when its parent goes.

The kernel sends that signal when the *thread* that forked the child ends, not the process, so it
is asked for only when the child is started from the main thread (a broker started from a worker
thread would otherwise be killed when that thread finishes); elsewhere, and off Linux, children
are stopped by their starter alone.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()  # looked up once, in the parent: the child only calls it


def parent_death_signal(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that makes the child receive ``sig`` when this
    process dies; None where that is not available (then pass no ``preexec_fn``)."""
    if _PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()

    def in_child() -> None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), sig)

    return in_child


def child_options(sig: int = signal.SIGKILL) -> dict:
    """``subprocess.Popen`` keyword arguments for a child in its own process group (so that
    stopping it reaches anything it starts, and a terminal's Ctrl-C reaches only its starter,
    which stops it) that dies with this process."""
    return {"process_group": 0, "preexec_fn": parent_death_signal(sig)}


def signal_group(leader_pid: int, sig: int) -> None:
    """``sig`` to the process group a child started with :func:`child_options` (or a new session)
    leads: the child and whatever it started. Call it only while the child is not reaped yet
    (``Popen.poll()`` is None), so that its id cannot name another group."""
    with contextlib.suppress(ProcessLookupError):  # every member is gone already
        os.killpg(leader_pid, sig)
