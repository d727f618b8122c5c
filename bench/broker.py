"""Broker throughput side by side: CommitGate and peer brokers in one run, alternating.

Starts a fresh CommitGate and (when installed) noida-db, a Rust broker that stores on disk,
each on a free port, then runs every workload against every broker in turn (A B A B ...), so
machine drift hits all alike. Load comes from librdkafka (confluent-kafka) in separate
processes (``bench/loadgen.py``). Prints the median of each figure and CommitGate's ratio to
each peer.
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gateway.launcher import BrokerProcess, free_port

START_TIMEOUT_S = 30.0


@dataclass
class Target:
    name: str
    bootstrap: str
    stop: Callable[[], None] = lambda: None
    results: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    name: str
    mode: str  # produce or consume
    size: int
    count: int
    acks: str = "1"


def _wait_port(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("did not listen in time")


def start_commitgate(root: Path) -> Target:
    broker = BrokerProcess(root / "commitgate", {"num.partitions": "1"}).start()
    return Target("CommitGate", broker.bootstrap, broker.stop)


def start_noida(root: Path) -> Target | None:
    binary = shutil.which("noida-db")
    if binary is None:
        return None
    port = free_port()
    log = open(root / "noida.log", "wb")  # noqa: SIM115 - the child keeps it
    process = subprocess.Popen([binary, "start", "--data-dir", str(root / "noida"), "--host",
                                "127.0.0.1", "--only", "kafka", "--kafka-port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT)
    _wait_port(port, process)

    def stop() -> None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)

    return Target("noida-db", f"127.0.0.1:{port}", stop)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the futures
    futures = admin.create_topics([NewTopic(topic, 1, 1,
                                            config={"max.message.bytes": str(8 << 20)})])
    for future in futures.values():
        try:
            future.result(30)
        except Exception as exc:  # noqa: BLE001 - "already exists" is fine, the rest shows later
            if "already exists" not in str(exc).lower():
                print(f"create {topic} on {bootstrap}: {exc}", file=sys.stderr)


def loadgen(target: Target, workload: Workload, topic: str) -> dict:
    args = [sys.executable, "-m", "bench.loadgen", workload.mode, "--bootstrap", target.bootstrap,
            "--topic", topic, "--count", str(workload.count), "--size", str(workload.size),
            "--acks", workload.acks]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-500:]}


def run(workloads: list[Workload], rounds: int, console: Console) -> list[Target]:
    root = Path(tempfile.mkdtemp(prefix="commitgate-bench-"))
    targets = [start_commitgate(root)]
    noida = start_noida(root)
    if noida is None:
        console.print("[yellow]noida-db not installed (pip install noida-db==0.2.2): "
                      "CommitGate alone[/]")
    else:
        targets.append(noida)
    try:
        for workload in workloads:
            for target in targets:
                _prepare(target, workload)
            for index in range(rounds):
                for target in targets:
                    _measure(target, workload, index, console)
    finally:
        for target in targets:
            target.stop()
        shutil.rmtree(root, ignore_errors=True)
    return targets


def _topic(workload: Workload, index: int) -> str:
    # produce rounds write fresh topics; consume rounds read the one prepared backlog
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", workload.name)
    return f"bench-{slug}-{index}" if workload.mode == "produce" else f"bench-{slug}"


def _prepare(target: Target, workload: Workload) -> None:
    """Untimed: create topics; for consume workloads, write the backlog."""
    if workload.mode == "consume":
        create_topic(target.bootstrap, _topic(workload, 0))
        backlog = Workload(workload.name, "produce", workload.size, workload.count)
        loadgen(target, backlog, _topic(workload, 0))


def _measure(target: Target, workload: Workload, index: int, console: Console) -> None:
    topic = _topic(workload, index)
    if workload.mode == "produce":
        create_topic(target.bootstrap, topic)
    result = loadgen(target, workload, topic)
    if "error" in result or result["records"] < workload.count:
        console.print(f"[red]{target.name} {workload.name}: {result}[/]")
        return
    mb_s = result["bytes"] / result["seconds"] / 1e6
    target.results.setdefault(workload.name, []).append(mb_s)
    console.print(f"  {workload.name:28} {target.name:12} round {index + 1}: {mb_s:8.1f} MB/s")


def report(targets: list[Target], workloads: list[Workload], console: Console) -> None:
    table = Table(title="MB/s, median of rounds (CommitGate's ratio to each peer)")
    table.add_column("workload")
    for target in targets:
        table.add_column(target.name, justify="right")
    ours = targets[0]
    for workload in workloads:
        cells = []
        mine = statistics.median(ours.results.get(workload.name) or [0])
        for target in targets:
            figures = target.results.get(workload.name)
            if not figures:
                cells.append("failed")
                continue
            median = statistics.median(figures)
            ratio = "" if target is ours else f" ({mine / median:.2f}x)"
            cells.append(f"{median:,.1f}{ratio}")
        table.add_row(workload.name, *cells)
    console.print(table)


PROFILES = {
    "quick": (3, [Workload("produce 1KiB acks=1", "produce", 1024, 300_000),
                  Workload("fetch 16KiB", "consume", 16 * 1024, 16_000)]),
    "full": (5, [Workload("produce 1KiB acks=1", "produce", 1024, 1_000_000),
                 Workload("fetch 16KiB", "consume", 16 * 1024, 64_000)]),
}


def main(profile: str = "quick") -> None:
    console = Console()
    rounds, workloads = PROFILES[profile]
    targets = run(workloads, rounds, console)
    report(targets, workloads, console)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "quick")
