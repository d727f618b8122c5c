"""The store benchmark runs end to end at a tiny volume, and its ratios are computed as
documented (figures are not checked: speed is measured with the benchmark itself, never
asserted in a test)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.store import RAW, partitions_name, summarize

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = [
    "raw buffered write", "ASYNC_FLUSH append, 64 KiB", "ASYNC_FLUSH append, 1 KiB",
    "SYNC_FLUSH append, 64 KiB", "SYNC_FLUSH append, 1 KiB", "read, 64 KiB",
    "16 KiB batches, 1 partition ", "100 partitions", "10,000 partitions",
]


@pytest.mark.timeout(300)
def test_bench_store_prints_every_measurement(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.store", "--data-dir", str(tmp_path), "--volume-mb", "4",
         "--partition-volume-mb", "4", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
        env={"COLUMNS": "240", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for name in MEASUREMENTS:
        assert name in proc.stdout, f"{name!r} missing from:\n{proc.stdout}"
    assert "appends per fsync" in proc.stdout and "% of raw" in proc.stdout
    assert not any(tmp_path.iterdir()), "the benchmark left files behind"


def test_ratios_compare_best_rounds_and_show_the_rounds_own_ratios() -> None:
    fast = "ASYNC_FLUSH append, 64 KiB batches"
    one, many = partitions_name(1), partitions_name(10_000)
    report = summarize({RAW: [1000.0, 4000.0, 2000.0], fast: [500.0, 1000.0, 1200.0],
                        one: [100.0, 400.0, 200.0], many: [90.0, 200.0, 190.0]})
    rows = {figure.name: figure for figure in report.figures}
    assert rows[fast].ratio == "30% of raw" and rows[fast].mb_per_s == 1200.0  # 1200 / 4000
    assert "ratio per round 25%-60%" in rows[fast].note
    assert rows[many].ratio == "50% of 1 partition" and rows[one].ratio == ""  # 200 / 400
