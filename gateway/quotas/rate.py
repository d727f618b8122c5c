"""Kafka's quota sensor: a Rate over sampled windows and the throttle time of a violation.

As Kafka's SampledStat / Rate (``quota.window.num`` samples of ``quota.window.size.seconds``):
a value goes into the current window (a new one starts when it is a window old, reusing the
oldest), windows older than all of them together count nothing, and the rate divides the sum by
the time since the oldest window began, at least ``num - 1`` whole windows. A recorded value that
takes the rate above the bound costs ``(rate - bound) / bound * that time``, capped at all the
windows' length (QuotaUtils.boundedThrottleTime).
"""
from __future__ import annotations


class QuotaRate:
    __slots__ = ("bound", "current", "last_ms", "num", "starts", "throttle_ms", "throttled",
                 "totals", "window_ms")

    def __init__(self, num: int, window_ms: float, bound: float, now_ms: float) -> None:
        self.num = num
        self.window_ms = window_ms
        self.starts = [now_ms]
        self.totals = [0.0]
        self.current = 0
        self.bound = bound
        self.last_ms = now_ms  # last recorded, for expiry
        self.throttled = 0  # responses throttled, and their throttle time, for /metrics
        self.throttle_ms = 0

    def record(self, value: float, now_ms: float) -> int:
        """Add ``value`` (bytes, or percent-seconds of request time); the throttle time in ms
        when the rate is now above the bound, else 0."""
        self.last_ms = now_ms
        self._add(value, now_ms)
        rate, elapsed_ms = self.measure(now_ms)
        if rate <= self.bound:
            return 0
        throttle = round((rate - self.bound) / self.bound * elapsed_ms)
        return min(throttle, int(self.num * self.window_ms))

    def unrecord(self, value: float, now_ms: float) -> None:
        """Take back a recorded value (a throttled fetch, answered without its data)."""
        self._add(-value, now_ms)

    def measure(self, now_ms: float) -> tuple[float, float]:
        """(rate per second, the window it is measured over in ms)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self.starts)
        full = int(elapsed // self.window_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        elapsed = max(elapsed, 1.0)
        return sum(self.totals) * 1000.0 / elapsed, elapsed

    def _add(self, value: float, now_ms: float) -> None:
        if now_ms >= self.starts[self.current] + self.window_ms:
            self.current = (self.current + 1) % self.num
            if self.current == len(self.starts):
                self.starts.append(now_ms)
                self.totals.append(0.0)
            else:
                self.starts[self.current] = now_ms
                self.totals[self.current] = 0.0
        self.totals[self.current] += value

    def _purge(self, now_ms: float) -> None:
        expire = self.num * self.window_ms
        for i, start in enumerate(self.starts):
            if now_ms - start >= expire:
                self.starts[i] = now_ms
                self.totals[i] = 0.0
