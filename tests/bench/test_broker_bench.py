"""The broker benchmark runs end to end on its tiny profile against CommitGate alone (both flush
modes), and its accounting holds: every record sent is acknowledged, and every record
acknowledged is read back (by a read_committed reader: all but the aborted transactions'
records). Figures are not checked: speed is measured with the benchmark itself, never asserted
in a test."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from commitgate.bench.broker import Harness
from commitgate.bench.flame import summarize
from commitgate.bench.profiles import (
    FETCH_COMMITTED,
    FETCH_UNCOMMITTED,
    PRODUCE_IDEMPOTENT,
    PRODUCE_TXN,
    PROFILES,
)
from commitgate.bench.targets import Target
from commitgate.bench.workloads import FETCH, LATENCY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench-brokers")
    proc = subprocess.run(
        [sys.executable, "-m", "commitgate", "bench", "brokers", "--profile", "tiny", "--no-peers",
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
                hidden = m["aborted"] if workload.isolation == "read_committed" else 0
                assert m["sent"] == m["acked"] == m["consumed"] + hidden, (target["name"], name, m)
                if workload.abort_every:  # every abort_every-th transaction of the backlog
                    assert m["aborted"] == workload.count // workload.abort_every, m
                else:
                    assert m["aborted"] == 0, m
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


@pytest.mark.timeout(300)
def test_transactional_workloads_commit_and_report_their_share_of_their_twin(results: dict
                                                                              ) -> None:
    measured = {t["name"]: t["measurements"] for t in results["targets"]}["CommitGate"]
    (committing,) = measured[PRODUCE_TXN]
    assert committing["figures"]["commits/s"] > 0, committing
    shares = {(r["workload"], r["versus"]): r for r in results["ratios"]}
    for workload, twin, goal in ((PRODUCE_TXN, PRODUCE_IDEMPOTENT, 0.8),
                                 (FETCH_COMMITTED, FETCH_UNCOMMITTED, 0.9)):
        row = shares[workload, twin]
        assert row["target"] == "CommitGate" and row["goal"] == goal, row
        mb_s = {name: measured[name][0]["figures"]["MB/s"] for name in (workload, twin)}
        assert row["share"] == pytest.approx(mb_s[workload] / mb_s[twin]), (row, mb_s)


def test_a_workload_held_against_another_alternates_with_it_round_by_round() -> None:
    profile = PROFILES["quick"]
    targets = [Target("CommitGate", "127.0.0.1:1"), Target("peer", "127.0.0.1:2")]
    plan = [(w.name, index, t.name) for w, index, t in Harness(targets, profile, Console()).plan()]
    for workload, twin in ((PRODUCE_TXN, PRODUCE_IDEMPOTENT), (FETCH_COMMITTED, FETCH_UNCOMMITTED)):
        pair = [step for step in plan if step[0] in (workload, twin)]
        assert pair == [(name, index, target) for index in range(profile.rounds)
                        for target in ("CommitGate", "peer") for name in (twin, workload)]
    assert len(plan) == len(set(plan)) == profile.rounds * len(targets) * len(profile.workloads)
