"""`bench/pipeline.py` runs end to end on a tiny topic and prints its figures: both readers'
MB/s, their ratio beside the 50% target, where the executors' time goes, and the demo's latency.
Figures are not checked (speed is measured with the benchmark, never asserted in a test), but
the latency arithmetic is, on made-up micro-batches."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from commitgate.bench.pipeline import NO_PROFILE, Batch, latencies

pytestmark = pytest.mark.slow  # starts Spark

ROOT = Path(__file__).resolve().parents[2]
FIGURE = r"[\d,]+\.\d"


@pytest.mark.timeout(900)
def test_prints_both_readers_the_ratio_and_the_latency() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "commitgate.bench.pipeline", "--size-mib", "2", "--rounds", "1",
         # the default 15 s warm-up makes a run's figures steady; the test checks their shape
         "--rate", "1000", "--latency-seconds", "5", "--warmup-seconds", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=880, check=False,
        env={**os.environ, "COLUMNS": "240"})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "Batch read of 2 MiB (2,048 records" in out
    assert re.search(rf"commitgate source, Spark local\[2\]\s*│\s*{FIGURE}\s*│\s*{FIGURE}", out)
    assert re.search(rf"one confluent-kafka consumer process\s*│\s*{FIGURE}", out)
    assert re.search(r"ratio source / consumer\s*│\s*\d+%.*target 50%: (NOT )?met", out)
    assert "CPU seconds during the last timed source read" in out
    # the executors' profile when py-spy (bench extra) is there and sampled them, else why not
    # (which parts the samples fall in varies with the machine's load: any part with a share)
    assert re.search(r"Python workers' samples in the profiled read \(py-spy\).*│\s*\d+%", out,
                     re.DOTALL) or \
        " ".join(f"no profile of the Python workers: {NO_PROFILE}".split()) in \
        " ".join(out.split())  # the table wraps the sentence wherever the width says
    latency = re.search(r"median ms.*\n.*\n.*│\s*([\d,]+)\s*│\s*([\d,]+)\s*│\s*[\d,]+\s*│$", out,
                        re.MULTILINE)
    assert latency, out[-2000:]
    median, p99 = (int(x.replace(",", "")) for x in latency.groups())
    assert 0 < median <= p99
    assert re.search(r"micro-batch phases \(Spark's durationMs\), median ms: triggerExecution "
                     r"[\d,]+, ", out)


def test_latency_is_produce_time_to_the_last_count_of_the_batch_that_read_it() -> None:
    batches = [Batch(1000, 1500, {0: 2, 1: 1}), Batch(2000, 2600, {0: 3, 1: 3})]
    # result records: (CreateTime, arrival); one of the first batch, two of the second
    results = [(1400, 1450.0), (2100, 2150.0), (2500, 2700.0)]
    clicks = [(0, 0, 900), (0, 1, 950), (1, 0, 990), (0, 2, 1800), (1, 1, 1900), (1, 2, 1950)]
    measured, unmatched = latencies(batches, results, clicks, since_ms=920)
    assert sorted(measured) == sorted([1450 - 950, 1450 - 990, 2700 - 1800, 2700 - 1900,
                                       2700 - 1950])
    assert unmatched == 0
    # a batch whose counts never arrived (its clicks all dropped as late) leaves them unmatched
    measured, unmatched = latencies(batches, results[:1], clicks, since_ms=0)
    assert (len(measured), unmatched) == (3, 3)
