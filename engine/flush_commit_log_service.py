"""FlushRealTimeService (ASYNC_FLUSH): appends answer at once; a timer flushes the page cache.

Every ``flush_interval_ms`` the CommitLog is synced when at least ``flush_least_pages`` pages
are dirty, or whatever is dirty once ``flush_thorough_interval_ms`` has passed since the last
full flush (RocketMQ's flushCommitLogLeastPages / flushCommitLogThoroughInterval). At most that
window is lost if the machine (not just the process) dies. A failed fdatasync, or any
failure of the service itself, takes the store offline (``halt``): nothing is synced after it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import CommitLog
from commitgate.engine.config import StoreConfig
from commitgate.engine.histogram import FLUSH_SECONDS_BUCKETS, Histogram
from commitgate.engine.mapped_file import PAGE_SIZE
from commitgate.engine.status import StoreStatus
from commitgate.engine.supervision import Supervisor

log = logging.getLogger(__name__)


class FlushCommitLogService:
    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, config: StoreConfig) -> None:
        self._commit_log = commit_log
        self._checkpoint = checkpoint
        self._interval = config.flush_interval_ms / 1000
        self._least_bytes = config.flush_least_pages * PAGE_SIZE
        self._thorough = config.flush_thorough_interval_ms / 1000
        self._last_full = time.monotonic()
        self._stop = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="flush-commitlog")
        self._task: asyncio.Task | None = None
        self._on_io_error: Callable[[str, BaseException], None] | None = None
        self.halted = False  # the store went offline: nothing is synced any more
        self.flushed_offset = commit_log.max_offset
        self.flush_seconds = Histogram(FLUSH_SECONDS_BUCKETS)  # each fdatasync round

    def start(self, supervisor: Supervisor,
              on_io_error: Callable[[str, BaseException], None]) -> None:
        """Run under ``supervisor``; a failure goes to ``on_io_error`` (the store goes offline:
        restarting could mark unsynced pages durable)."""
        self._on_io_error = on_io_error
        self._task = supervisor.spawn(
            "flush-commitlog", self._run, stop=self._stop,
            on_failure=lambda exc: on_io_error("the CommitLog flush service", exc))

    def halt(self) -> None:
        self.halted = True

    async def wait_durable(self, phy_end: int) -> StoreStatus:
        """ASYNC_FLUSH answers after the append: the page cache is the durability point, until
        the store goes offline (what was not synced then may be lost)."""
        if self.halted and phy_end > self.flushed_offset:
            return StoreStatus.DISK_ERROR
        return StoreStatus.OK

    async def sync_to(self, phy_end: int) -> StoreStatus:
        """Make the CommitLog durable up to ``phy_end`` now (the CommitLog cleaner's copies)."""
        if phy_end > self.flushed_offset:
            await self._flush()
        return StoreStatus.OK if phy_end <= self.flushed_offset else StoreStatus.DISK_ERROR

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self._flush()
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._interval)
            dirty = self._commit_log.max_offset - self.flushed_offset
            thorough = time.monotonic() - self._last_full >= self._thorough
            if dirty >= self._least_bytes or (dirty > 0 and thorough):
                await self._flush()

    async def _flush(self) -> None:
        if self.halted:
            return
        loop = asyncio.get_running_loop()
        began = time.monotonic()
        try:
            flushed = await loop.run_in_executor(self._executor, self._commit_log.flush)
        except OSError as exc:
            self._on_io_error("ASYNC_FLUSH: fdatasync of the CommitLog", exc)
            return
        self.flush_seconds.observe(time.monotonic() - began)
        self.flushed_offset = flushed
        self._last_full = time.monotonic()
        value = self._checkpoint.value
        value.commitlog_flushed, value.physic_msg_timestamp = flushed, int(time.time() * 1000)
