"""``python -m commitgate.bench.admin`` runs end to end on a tiny size: both brokers, alternating rounds,
the /metrics scrapes, and its table with both figures and the ratios. Figures are not checked:
speed is measured with the benchmark itself, never asserted in a test."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = ("produce MB/s", "fetch MB/s", "produce broker CPU s/GB", "fetch broker CPU s/GB")
NUMBER = r"\s+(\d+\.\d+)"


def test_admin_bench_prints_both_sides_and_the_ratios():
    proc = subprocess.run(
        [sys.executable, "-m", "commitgate.bench.admin", "--records", "3000", "--rounds", "2",
         "--scrape-interval", "0.2"],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert len(re.findall(r"^round \d/2: produce ", out, re.MULTILINE)) == 2
    for row in ROWS[:2]:  # MB/s
        found = re.search(re.escape(row) + NUMBER * 4 + "$", out, re.MULTILINE)
        assert found, f"no figures for {row}:\n{out}"
        on, off, ratio, _paired = map(float, found.groups())
        assert on > 0 and off > 0 and ratio == pytest.approx(on / off, rel=0.05)
    for row in ROWS[2:]:  # CPU s/GB: a tiny run may take less than the clock's 10 ms tick
        assert re.search(re.escape(row) + NUMBER * 2 + r"\s+(\d+\.\d+|n/a)" * 2 + "$", out,
                         re.MULTILINE), f"no figures for {row}:\n{out}"
    scrapes = re.search(r"^(\d+) scrapes of /metrics", out, re.MULTILINE)
    assert scrapes and int(scrapes[1]) >= 2
