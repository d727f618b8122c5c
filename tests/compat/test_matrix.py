"""The compatibility matrix against a freshly started CommitGate: one broker, one driver process
per client running every scenario (compat_tests/). Each client's cells must pass (or be n/a,
with the client's reason, compat_tests/clients.py). A client that is skipped (its runtime is
missing) fails: CI must run every client; COMMITGATE_ALLOW_MISSING_CLIENTS=1 turns that into a
skip locally.
kcat comes from Debian: installed here (as root, as CI runs) when it is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from commitgate.compat_tests.clients import client_names
from commitgate.compat_tests.matrix import Matrix, run_matrix
from commitgate.launcher import BrokerProcess

ALLOW_MISSING = "COMMITGATE_ALLOW_MISSING_CLIENTS"
APT_TIMEOUT_S = 600


def _install_kcat() -> None:
    """kcat is a Debian package: install it when missing and allowed (root, as in CI)."""
    if shutil.which("kcat") or shutil.which("apt-get") is None or os.geteuid() != 0:
        return
    install = ["apt-get", "install", "-y", "-q", "kcat"]
    if _apt(install) != 0:
        _apt(["apt-get", "update", "-q"])  # a fresh machine has no package lists yet
        _apt(install)  # a failure shows as kcat's skipped cells


def _apt(command: list[str]) -> int:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(command, capture_output=True, env=env, timeout=APT_TIMEOUT_S,
                          check=False).returncode


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> tuple[Matrix, Path]:
    """The matrix and the broker's log (a failing client's test shows its lines)."""
    _install_kcat()
    with BrokerProcess(tmp_path_factory.mktemp("compat") / "data",
                       # KIP-848 members hear of a rebalance on their next heartbeat; a classic
                       # group's first member need not wait 3 s for others (the scenarios open
                       # their members one at a time and wait for each rebalance themselves)
                       {"num.partitions": "1", "group.consumer.heartbeat.interval.ms": "500",
                        "group.initial.rebalance.delay.ms": "0"}
                       ) as broker:
        return run_matrix(broker.bootstrap, "CommitGate"), broker.log_path


@pytest.mark.parametrize("client", client_names())
def test_client_passes_its_scenarios(matrix, client):
    run, broker_log = matrix
    [result] = [c for c in run.clients if c.name == client]
    skipped = {cell.detail for cell in result.cells.values() if cell.status == "skipped"}
    if skipped:
        reason = f"{client} skipped: {'; '.join(sorted(skipped))}"
        if os.environ.get(ALLOW_MISSING) == "1":
            pytest.skip(f"{reason} ({ALLOW_MISSING}=1)")
        pytest.fail(f"{reason}: every client must run in CI ({ALLOW_MISSING}=1 skips locally)")
    failed = {name: cell.detail for name, cell in result.cells.items() if cell.status == "fail"}
    if failed:
        _print_broker_lines(broker_log, f"-{client}-")
    assert not failed, f"{client} ({result.version}) failed: {failed}"


def _print_broker_lines(log: Path, mark: str, most: int = 200) -> None:
    """The broker's log lines naming the client's topics and groups (shown with a failure)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if mark in line]
    print(f"broker log lines with {mark!r} (last {most} of {len(lines)}):")
    print("\n".join(lines[-most:]))
