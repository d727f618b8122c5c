"""Start a CommitGate broker as a subprocess on a free port (tests, compat matrix, benchmarks).

The broker is the real thing: ``python -m commitgate serve`` (the ``commitgate serve`` command)
with its own data directory, reachable at ``bootstrap``, its admin HTTP API on a free port of its
own at ``admin_url`` (off when the overrides set ``admin.listeners`` empty). It counts as started
once the broker process itself listens on its port (another process that took the port meanwhile
does not count: the start is tried again on new ports it picked itself). Stopping it sends
SIGTERM (clean) or SIGKILL (crash). It runs in its own process group and dies with the process
that started it (``launcher/children.py``), so a test run or benchmark killed by a timeout leaves
no broker behind.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar, Self

from commitgate.launcher.children import child_options, signal_group
from commitgate.launcher.listening import listening_ports

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
START_TRIES = 3  # a port picked free can be taken by another process before the broker binds it
PORT_TAKEN = "address already in use"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortTaken(RuntimeError):
    """The broker could not bind a port it was given."""


class BrokerProcess:
    # settings under every instance's own overrides (a test suite shrinks segments with it)
    default_overrides: ClassVar[dict[str, str]] = {}

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None,
                 port: int | None = None, log_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        # ports picked here (none given, nor set in the overrides) are picked again if taken
        self.own_ports = port is None and not {"listeners", "admin.listeners"} & set(
            overrides or {})
        self.port = port or free_port()
        self.admin_port = self._other_port()
        self.overrides = dict(overrides or {})
        self.log_path = log_path or self.data_dir.with_name(self.data_dir.name + ".log")
        self.process: subprocess.Popen | None = None

    def _other_port(self) -> int:
        chosen = free_port()
        while chosen == self.port:
            chosen = free_port()
        return chosen

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def command(self) -> list[str]:
        settings = {"log.dirs": str(self.data_dir), "listeners": f"127.0.0.1:{self.port}",
                    "advertised.listeners": f"127.0.0.1:{self.port}",
                    "admin.listeners": self.admin_url, **self.default_overrides,
                    **self.overrides}
        args = [sys.executable, "-m", "commitgate", "serve"]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def start(self) -> Self:
        for attempt in range(1, START_TRIES + 1):
            try:
                return self._start_once()
            except PortTaken:
                if attempt == START_TRIES or not self.own_ports:
                    raise
                self.port = free_port()
                self.admin_port = self._other_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> Self:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                        **child_options())
        log.close()
        try:
            self._wait_listening(log_start)
        except BaseException:  # also a Ctrl-C or a starter's signal handler while waiting
            if self.process is not None and self.process.poll() is None:
                self.kill()
            raise
        return self

    def _wait_listening(self, log_start: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code, self.process = self.process.returncode, None
                failure = PortTaken if PORT_TAKEN in self._log_since(log_start).lower() \
                    else RuntimeError
                raise failure(f"broker exited with {code}: {self.log_tail()}")
            if self.port in listening_ports(self.process.pid):
                return
            time.sleep(0.05)
        raise RuntimeError(f"broker did not listen within {START_TIMEOUT_S}s: {self.log_tail()}")

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> int:
        """SIGTERM and wait: returns the exit code (0 for a clean stop)."""
        return self._signal(signal.SIGTERM)

    def kill(self) -> int:
        return self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            signal_group(self.process.pid, sig)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)
        code = self.process.returncode
        self.process = None
        return code

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill() if self.process and self.process.poll() is None and exc[0] else self.stop()
