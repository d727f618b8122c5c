"""``commitgate bench brokers`` leaves nothing behind however it ends: stopped by SIGTERM or
Ctrl-C (SIGINT) once its brokers are up, it kills them and removes their directories before it
exits; killed by SIGKILL (a CI timeout), its brokers die with it (the kernel's parent-death
signal) and the next run removes the directory it left."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commitgate.bench.broker import ROOT_PREFIX, remove_dead_runs

ROOT = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 120.0  # two broker starts on a loaded machine
EXIT_TIMEOUT_S = 60.0


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # gone since the listing
                continue
            parent = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(parent, []).append(int(entry))
    return children


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _brokers_under(root_pid: int) -> dict[int, int]:
    """The ``commitgate serve`` processes below ``root_pid``: pid -> Kafka port."""
    children, found, todo = _children(), {}, [root_pid]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            args = _cmdline(pid)
            if "commitgate" in args and "serve" in args:
                found[pid] = next(int(a.rpartition(":")[2]) for a in args
                                  if a.startswith("listeners="))
    return found


def _running(pid: int) -> bool:
    """A live broker at ``pid``: not gone, not a zombie waiting for its reaper. A process on
    its way out has no command line any more (its memory goes before its sockets close): it
    counts as running until it is a zombie; a command line without ``serve`` is another
    process that took the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    args = [arg for arg in _cmdline(pid) if arg]
    return stat[stat.rindex(")") + 2] not in "ZX" and (not args or "serve" in args)


def _listening(port: int) -> bool:
    """A socket listens on ``port`` (the kernel's table: connecting to find out can succeed with
    nobody listening, when the connection's own port happens to be ``port``)."""
    listen_state = "0A"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == listen_state and int(local.rpartition(":")[2], 16) == port:
            return True
    return False


def _wait_for_brokers(bench: subprocess.Popen, count: int) -> dict[int, int]:
    deadline, brokers = time.monotonic() + UP_TIMEOUT_S, {}
    while time.monotonic() < deadline:
        assert bench.poll() is None, bench.communicate()
        brokers = _brokers_under(bench.pid)
        if len(brokers) == count and all(_listening(port) for port in brokers.values()):
            return brokers
        time.sleep(0.05)
    raise AssertionError(f"{count} brokers not up within {UP_TIMEOUT_S}s: {brokers}")


def _wait_gone(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running at the deadline (the kernel kills them on their parent's
    death, and their new parent reaps them a moment later)."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while (alive := [pid for pid in pids if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _wait_closed(ports: list[int]) -> list[int]:
    """Those of ``ports`` still listening at the deadline (a killed process's sockets close a
    moment after it is reaped, as the kernel tears down what it held)."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while (open_ports := [p for p in ports if _listening(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return open_ports


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_brokers_and_their_directories_go_with_the_benchmark(tmp_path: Path, sig: int) -> None:
    temp = tmp_path / "tmp"  # the run's temporary directories land here
    temp.mkdir()
    bench = subprocess.Popen(
        [sys.executable, "-m", "commitgate", "bench", "brokers", "--profile", "tiny",
         "--no-peers", "--out", str(tmp_path / "out")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TMPDIR": str(temp), "COLUMNS": "240"})
    brokers: dict[int, int] = {}
    try:
        brokers = _wait_for_brokers(bench, 2)  # CommitGate and CommitGate SYNC
        (run_dir,) = temp.glob(f"{ROOT_PREFIX}*")
        assert run_dir.name.startswith(f"{ROOT_PREFIX}{bench.pid}-")
        bench.send_signal(sig)
        output, _ = bench.communicate(timeout=EXIT_TIMEOUT_S)
        if sig == signal.SIGKILL:
            assert bench.returncode == -signal.SIGKILL
            assert _wait_gone(list(brokers)) == []
            assert run_dir.exists()  # nobody was left to remove it: the next run does
            assert remove_dead_runs(temp) == [run_dir]
        else:  # it killed its brokers before exiting (one still starting: the kernel, as it exits)
            assert bench.returncode == 128 + sig, output[-3000:]
            assert _wait_gone(list(brokers)) == [], output[-3000:]
            assert signal.Signals(sig).name in output, output[-3000:]
        assert list(temp.glob(f"{ROOT_PREFIX}*")) == [], output[-3000:]
        assert _wait_closed(list(brokers.values())) == []
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
        for pid in brokers:  # only if the test failed: never leave a broker running
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_run_removes_only_the_directories_of_runs_that_are_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    dead = tmp_path / f"{ROOT_PREFIX}{gone.pid}-abc"
    live = tmp_path / f"{ROOT_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{ROOT_PREFIX}results"
    for path in (dead, live, other):
        (path / "data").mkdir(parents=True)
    assert remove_dead_runs(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and other.exists()
