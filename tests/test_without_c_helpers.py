"""The suites that reach the C helpers run once more with ``COMMITGATE_NO_C=1``, so that a plain
``python -m pytest`` (what CI runs) also tests the pure-Python fallbacks on a machine that built
the helpers: the record walk (``protocol/record_walk.py``), the IndexBuilder's walk, the entry
packing and the ConsumeQueue core in Python. Their "c" cases skip there, and wherever a helper
was not built: the first test says so."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from commitgate.native import c_helpers

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/protocol", "tests/engine", "tests/gateway/test_produce_validation.py")
# SIGKILL loops of fixed length (~150 s of the ~200 s the suites take): their subject is
# recovery after a crash, which is Python either way; the bytes the entry writer and the
# ConsumeQueue core write without the helpers are held to the helpers' in test_commit_log and
# test_queue_core, and the other crash tests still run here.
LEFT_OUT = (
    ("test_crash_recovery", "test_sigkill_during_sync_flush_appends_loses_no_acknowledged_batch"),
    ("test_compaction_crash", "test_sigkill_during_compaction_keeps_the_last_record_of_every_key"),
    ("test_relocation_crash", "test_sigkill_during_relocation_keeps_every_acknowledged_batch"),
)
TIMEOUT_S = 1200


def test_the_c_helpers_are_built() -> None:
    """A C helper that does not compile only warns at install (they are optional): the tests
    of its "c" cases then skip, and this fails."""
    if c_helpers.disabled():
        pytest.skip(f"{c_helpers.SWITCH} is set")
    missing = [name for name in c_helpers.HELPERS if c_helpers.load(name) is None]
    assert not missing, f"not built: {missing} (pip install --no-deps -e . with a C compiler)"


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_protocol_engine_and_produce_validation_pass_without_the_c_helpers() -> None:
    if c_helpers.disabled():
        pytest.skip(f"this run is already without the C helpers ({c_helpers.SWITCH} is set)")
    # in one process (-n 0): this test's worker already shares the machine with another
    command = [sys.executable, "-m", "pytest", *SUITES, "-x", "-q", "-n", "0", "-p",
               "no:cacheprovider",
               *(f"--deselect=tests/engine/{module}.py::{test}" for module, test in LEFT_OUT)]
    proc = subprocess.run(command, cwd=ROOT, env={**os.environ, c_helpers.SWITCH: "1"},
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    report = proc.stdout[-12_000:] + proc.stderr[-3_000:]
    assert proc.returncode == 0, report
    assert re.search(r"\b[1-9]\d* passed\b", proc.stdout), report
