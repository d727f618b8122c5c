"""The store benchmark runs end to end at a tiny volume (figures are not checked: speed is
measured with the benchmark itself, never asserted in a test)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = [
    "raw buffered write", "ASYNC_FLUSH append, 64 KiB", "ASYNC_FLUSH append, 1 KiB",
    "SYNC_FLUSH append, 64 KiB", "SYNC_FLUSH append, 1 KiB", "read, 64 KiB",
    "1 partitions", "100 partitions", "10000 partitions",
]


@pytest.mark.timeout(300)
def test_bench_store_prints_every_measurement(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.store", "--data-dir", str(tmp_path), "--volume-mb", "4",
         "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
        env={"COLUMNS": "240", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in MEASUREMENTS:
        assert name in proc.stdout, f"{name!r} missing from:\n{proc.stdout}"
    assert "appends per fsync" in proc.stdout and "% of raw" in proc.stdout
    assert not any(tmp_path.iterdir()), "the benchmark left files behind"
