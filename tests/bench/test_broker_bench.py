"""The broker benchmark runs end to end on its tiny profile against CommitGate alone (both flush
modes), and its accounting holds: every record sent is acknowledged, and every record
acknowledged is read back. Figures are not checked: speed is measured with the benchmark
itself, never asserted in a test."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.flame import summarize
from bench.profiles import PROFILES
from bench.workloads import FETCH, LATENCY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench-brokers")
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "brokers", "--profile", "tiny", "--no-peers",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
        env={**os.environ, "COLUMNS": "240"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Median of rounds" in proc.stdout
    for chart in ("throughput.png", "partitions.png", "latency-1.png", "latency-2.png"):
        assert (out / chart).stat().st_size > 0, chart
    return json.loads((out / "results.json").read_text())


@pytest.mark.timeout(300)
def test_every_workload_ran_on_the_brokers_meant_for_it(results: dict) -> None:
    measured = {t["name"]: t["measurements"] for t in results["targets"]}
    assert set(measured) == {"CommitGate", "CommitGate SYNC"}
    for workload in PROFILES["tiny"].workloads:
        names = ["CommitGate", "CommitGate SYNC"] if workload.sync_flush else ["CommitGate"]
        for name in names:
            rounds = measured[name].get(workload.name, [])
            assert len(rounds) == PROFILES["tiny"].rounds, (name, workload.name)
            assert all(not m["error"] for m in rounds), rounds
    assert not any(w.name in measured["CommitGate SYNC"]
                   for w in PROFILES["tiny"].workloads if not w.sync_flush)


@pytest.mark.timeout(300)
def test_records_sent_acknowledged_and_consumed_agree(results: dict) -> None:
    kinds = {w.name: w for w in PROFILES["tiny"].workloads}
    for target in results["targets"]:
        for name, rounds in target["measurements"].items():
            workload = kinds[name]
            for m in rounds:
                assert m["sent"] == m["acked"] == m["consumed"], (target["name"], name, m)
                if workload.kind == LATENCY:  # as many records as the offered load for its time
                    assert m["sent"] == int(m["figures"]["offered records/s"] * workload.seconds)
                elif workload.kind == FETCH:  # the backlog, written once per broker
                    assert m["sent"] == workload.count
                else:
                    assert m["sent"] == workload.count


@pytest.mark.timeout(300)
def test_each_measurement_records_the_brokers_cpu_and_the_others_background_cpu(results: dict
                                                                                ) -> None:
    for target in results["targets"]:
        for rounds in target["measurements"].values():
            for m in rounds:
                assert m["broker_cpu_s"] >= 0 and m["others_cpu_s"] >= 0, m
                assert 0 <= m["settle_s"] < 31, m


@pytest.mark.timeout(300)
def test_latency_workloads_report_percentiles_in_order(results: dict) -> None:
    for target in results["targets"]:
        for rounds in target["measurements"].values():
            for m in rounds:
                if "p50 ms" in m["figures"]:
                    f = m["figures"]
                    assert 0 <= f["p50 ms"] <= f["p99 ms"] <= f["p999 ms"]


def test_profile_summary_counts_self_and_total_samples() -> None:
    collapsed = ("main (gateway/server.py:10);handle (gateway/handlers/produce.py:42) 3\n"
                 "main (gateway/server.py:10);append (engine/commit_log.py:7) 1\n")
    summary = summarize(collapsed)
    assert summary.startswith("4 samples")
    assert "75.0%  gateway/handlers/produce.py:handle" in summary
    assert "100.0%  gateway/server.py:main" in summary.split("total")[1]
