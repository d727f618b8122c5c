"""GroupCommitService (SYNC_FLUSH): appends wait for durability and share fdatasyncs.

Waiters register the CommitLog offset they need on disk. The service syncs everything written
so far on a worker thread; appends that arrive meanwhile wait for the next sync, so under load
one fdatasync covers many appends. The event loop never blocks on the disk. A failed
fdatasync, or any failure of the service itself, takes the store offline (``halt``): every
waiter then gets DISK_ERROR, never OK, and no later sync may claim the pages that failed.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import CommitLog
from commitgate.engine.histogram import FLUSH_SECONDS_BUCKETS, GROUP_COMMIT_SIZE_BUCKETS, Histogram
from commitgate.engine.status import StoreStatus
from commitgate.engine.supervision import Supervisor

log = logging.getLogger(__name__)


class GroupCommitService:
    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, timeout_ms: int) -> None:
        self._commit_log = commit_log
        self._checkpoint = checkpoint
        self._timeout = timeout_ms / 1000
        self._waiters: list[tuple[int, int, asyncio.Future[StoreStatus]]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="group-commit")
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._on_io_error: Callable[[str, BaseException], None] | None = None
        self.halted = False  # the store went offline: nothing is synced or promised any more
        self.flushed_offset = commit_log.max_offset
        self.requests = 0  # appends that waited
        self.syncs = 0  # fdatasync rounds that served them
        self.flush_seconds = Histogram(FLUSH_SECONDS_BUCKETS)  # each fdatasync round
        self.commit_sizes = Histogram(GROUP_COMMIT_SIZE_BUCKETS)  # appends answered by one

    def start(self, supervisor: Supervisor,
              on_io_error: Callable[[str, BaseException], None]) -> None:
        """Run under ``supervisor``; a failure goes to ``on_io_error`` (the store goes offline:
        restarting could mark unsynced pages durable)."""
        self._on_io_error = on_io_error
        self._task = supervisor.spawn(
            "group-commit", self._run,
            on_failure=lambda exc: on_io_error("the group commit service", exc))

    def halt(self) -> None:
        """The store is offline: answer every waiter DISK_ERROR and sync nothing more."""
        self.halted = True
        self._release(self._commit_log.max_offset + 1, StoreStatus.DISK_ERROR)

    async def wait_durable(self, phy_end: int) -> StoreStatus:
        """Return once the CommitLog is on disk up to ``phy_end`` (OK, FLUSH_TIMEOUT, DISK_ERROR)."""
        if phy_end <= self.flushed_offset:
            return StoreStatus.OK
        if self.halted:
            return StoreStatus.DISK_ERROR
        if self._stopping:
            return StoreStatus.STORE_CLOSED
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (phy_end, next(self._seq), future))
        self.requests += 1
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._timeout)
        except TimeoutError:
            log.error("SYNC_FLUSH: offset %d not on disk after %.1fs", phy_end, self._timeout)
            return StoreStatus.FLUSH_TIMEOUT

    async def sync_to(self, phy_end: int) -> StoreStatus:
        """Make the CommitLog durable up to ``phy_end`` now (the CommitLog cleaner's copies)."""
        return await self.wait_durable(phy_end)

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if (self._waiters or self._stopping) and not self.halted:
                await self._sync_round(loop)
            if self._stopping and not self._waiters:
                return

    async def _sync_round(self, loop: asyncio.AbstractEventLoop) -> None:
        began = time.monotonic()
        try:
            flushed = await loop.run_in_executor(self._executor, self._commit_log.flush)
        except OSError as exc:  # the store goes offline, which answers the waiters
            self._on_io_error("SYNC_FLUSH: fdatasync of the CommitLog", exc)
            return
        self.flush_seconds.observe(time.monotonic() - began)
        self.syncs += 1
        self.flushed_offset = flushed
        value = self._checkpoint.value
        value.commitlog_flushed, value.physic_msg_timestamp = flushed, int(time.time() * 1000)
        self.commit_sizes.observe(self._release(flushed, StoreStatus.OK))
        if self._waiters:
            self._wake.set()

    def _release(self, upto: int, status: StoreStatus) -> int:
        """Answer the waiters up to ``upto``; returns how many."""
        released = 0
        while self._waiters and self._waiters[0][0] <= upto:
            future = heapq.heappop(self._waiters)[2]
            released += 1
            if not future.done():
                future.set_result(status)
        return released
