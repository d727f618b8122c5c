"""Parked fetches (Kafka's fetch purgatory, RocketMQ's PullRequestHoldService).

A fetch that found too little data waits on the partitions it asked for; the store's dispatch
listener wakes it the moment one of them receives an append. Nothing polls.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from commitgate.engine.commit_log import DispatchRequest


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], set[asyncio.Future]] = {}
        self.closed = False

    def on_dispatch(self, req: DispatchRequest) -> None:
        """Runs after every append: one dict lookup when nobody waits."""
        if not self._waiting:
            return
        futures = self._waiting.pop((req.topic, req.partition), None)
        if futures:
            for future in futures:
                if not future.done():
                    future.set_result(None)

    async def wait(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> bool:
        """Wait until one of ``partitions`` gets data or the timeout passes; True if woken."""
        if self.closed:
            return False
        future = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for key in keys:
            self._waiting.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiting[key]

    def wake_all(self) -> None:
        """Release every parked fetch and park no more (shutdown)."""
        self.closed = True
        for futures in self._waiting.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)
        self._waiting.clear()
