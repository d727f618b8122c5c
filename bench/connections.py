"""Memory per idle connection and per request in flight, measured on a fresh broker subprocess.

The broker's allocated memory is RssAnon + RssShmem of /proc/<pid>/status (its resident set
but for the pages of the files it maps, such as the CommitLog's), read before and after opening
the connections or sending the requests, divided by their number. Requests in flight are frames
whose size prefix and part of whose body have been sent: the broker holds each one, unanswered,
until the rest arrives. queued.max.request.bytes is off so that every one is read at once.
"""
from __future__ import annotations

import contextlib
import resource
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from commitgate.launcher import BrokerProcess

DEADLINE_S = 120.0
MIB = 1 << 20
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, key, version, id, no client


def _memory(pid: int) -> int:
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines())
    return sum(int(fields[name].split()[0]) for name in ("RssAnon", "RssShmem")) * 1024


def _fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _answered(sock: socket.socket) -> None:
    """Send ApiVersions v0 and read its whole response: the broker read everything before."""
    sock.sendall(API_VERSIONS_V0)
    (size,) = struct.unpack(">i", _read(sock, 4))
    _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


@contextlib.contextmanager
def _connections(broker: BrokerProcess, count: int) -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(socket.create_connection(("127.0.0.1", broker.port),
                                                    timeout=DEADLINE_S))
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def _idle_cost(broker: BrokerProcess, count: int) -> float:
    pid = broker.process.pid
    fds, before = _fds(pid), _memory(pid)
    with _connections(broker, count) as sockets:
        for sock in sockets:
            _answered(sock)
        cost = (_memory(pid) - before) / count
    _wait(lambda: _fds(pid) <= fds + 2, "the broker to close the connections")
    return cost


def _in_flight_cost(broker: BrokerProcess, count: int, frame: int, sent: int) -> float:
    """Memory per request of ``frame`` bytes of which ``sent`` have arrived."""
    pid = broker.process.pid
    with _connections(broker, 1) as [probe]:
        _answered(probe)
        before = _memory(pid)
        with _connections(broker, count) as sockets:
            for sock in sockets:
                sock.sendall(struct.pack(">i", frame) + bytes(sent))
            _answered(probe)  # sent after them: they were read before it was answered
            return (_memory(pid) - before) / count


def main(connections: int, requests: int, request_mb: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 1024
    if soft < wanted and (hard == resource.RLIM_INFINITY or hard >= wanted):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    frame = request_mb * MIB
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-") as tmp, BrokerProcess(
            Path(tmp) / "data", {"queued.max.request.bytes": "-1",
                                 "socket.request.max.bytes": str(frame)}) as broker:
        with _connections(broker, 1) as [warm]:
            _answered(warm)
        rows = [(f"idle connection (x{connections}, one ApiVersions each)",
                 _idle_cost(broker, connections))]
        for label, sent in (("size prefix alone", 0), ("half its body", frame // 2),
                            ("all but its last byte", frame - 1)):
            rows.append((f"{request_mb} MiB request in flight, {label} (x{requests})",
                         _in_flight_cost(broker, requests, frame, sent)))
    width = max(len(label) for label, _ in rows)
    print(f"{'broker memory (RssAnon + RssShmem)':<{width}}  per item")
    for label, cost in rows:
        print(f"{label:<{width}}  {cost / 1024:10.1f} KiB")
