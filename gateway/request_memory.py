"""The memory of all requests read and not yet answered (Kafka's ``queued.max.request.bytes``).

A frame is charged its full size as soon as its size prefix is read, and the charge is given
back once its response is written. As Kafka's SimpleMemoryPool (non-strict, as its broker uses
it), a charge is granted while anything at all is left: the total may pass the limit by one
frame, so a single request larger than the whole budget still proceeds once nothing else holds
memory. A connection refused a charge stops reading and waits here, first come first served.
"""
from __future__ import annotations

import collections
from collections.abc import Callable

from commitgate.gateway.network_stats import NetworkStats


class RequestMemory:
    def __init__(self, limit: int, stats: NetworkStats | None = None) -> None:
        self.limit = limit  # negative: no bound (Kafka's -1)
        self.stats = stats or NetworkStats()  # keeps the bytes charged and the waits
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    @property
    def used(self) -> int:
        return self.stats.queued_request_bytes

    def available(self) -> bool:
        return self.limit < 0 or self.stats.queued_request_bytes < self.limit

    def try_take(self, size: int) -> bool:
        """Charge ``size`` if anything is left and nobody waits before us."""
        if self._waiters or not self.available():
            return False
        self.stats.queued_request_bytes += size
        return True

    def take(self, size: int) -> None:
        """Charge ``size`` unconditionally (a waiter called back with memory available)."""
        self.stats.queued_request_bytes += size

    def give(self, size: int) -> None:
        self.stats.queued_request_bytes -= size
        while self._waiters and self.available():
            self._waiters.popleft()()  # takes its charge at once, before the next is asked

    def wait(self, granted: Callable[[], None]) -> None:
        """Call ``granted`` (once) when memory is available again; it must ``take`` then."""
        self.stats.request_memory_waits += 1
        self._waiters.append(granted)

    def cancel(self, granted: Callable[[], None]) -> None:
        try:
            self._waiters.remove(granted)
        except ValueError:
            pass
