"""Warnings about what one client address sent, rate-limited per address.

A client looping on a bad request must not flood the log: each address gets ``burst`` warnings
per interval, the rest are counted (and logged at DEBUG with their details), and one line at the
end of the interval says how many were suppressed.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from commitgate.gateway.network_stats import NetworkStats

BURST = 5
INTERVAL_S = 60.0


@dataclass
class _Window:
    since: float
    logged: int = 0
    suppressed: int = 0


class PeerLog:
    def __init__(self, logger: logging.Logger, stats: NetworkStats, burst: int = BURST,
                 interval_s: float = INTERVAL_S) -> None:
        self.log = logger
        self.stats = stats
        self.burst = burst
        self.interval_s = interval_s
        self._windows: dict[str, _Window] = {}

    def warning(self, host: str, msg: str, *args: object) -> None:
        self.log_at(logging.WARNING, host, msg, *args)

    def log_at(self, level: int, host: str, msg: str, *args: object) -> None:
        """Log at ``level`` within the address's burst, else count and log at DEBUG."""
        now = time.monotonic()
        window = self._windows.get(host)
        if window is None or now - window.since >= self.interval_s:
            if window is not None:
                self._summary(host, window)
            window = self._windows[host] = _Window(now)
        if window.logged < self.burst:
            window.logged += 1
            self.log.log(level, msg, *args)
            return
        window.suppressed += 1
        self.stats.warnings_suppressed += 1
        self.log.debug(msg, *args)

    def flush(self) -> None:
        """End the intervals that are over (called periodically): summaries, then forget."""
        now = time.monotonic()
        for host, window in list(self._windows.items()):
            if now - window.since >= self.interval_s:
                self._summary(host, window)
                del self._windows[host]

    def _summary(self, host: str, window: _Window) -> None:
        if window.suppressed:
            self.log.warning("%d more warnings about requests from %s in the last %g s "
                             "were suppressed", window.suppressed, host, self.interval_s)
