"""FlushConsumeQueueService: syncs dirty ConsumeQueue files, then saves the checkpoint.

ConsumeQueues are derived state, so they are synced on a relaxed timer, as in RocketMQ: every
``consumequeue_flush_interval_ms`` the files with at least ``consumequeue_flush_least_pages``
dirty pages, and every ``consumequeue_flush_thorough_interval_ms`` all of them. Syncing a file
that only a few units dirtied would clean its page, and the next append to that partition would
pay to dirty it again; with 10,000 partitions that cost a quarter of append throughput. The
checkpoint's ``consumequeue_flushed`` only moves after a thorough round, which first writes
every queue's pending units (see ConsumeQueue), when every file covering it is on disk;
recovery after a crash re-dispatches from there. The queues' ends noted at that drain are
saved with it (see ConsumeQueueStore). With thousands of partitions, one fdatasync
per dirty file would take seconds, so above ``SYNCFS_THRESHOLD`` dirty files a single
syncfs(2) of the data directory's filesystem does the same work in one call.

A failed sync takes the store offline, as for the CommitLog: a later sync that succeeds would
let the checkpoint claim units the kernel may have dropped, and the CommitLog cleaner deletes
segments on the strength of synced units. The queues are rebuilt from the CommitLog at the
restart (replayed from the frozen checkpoint). Any other failure restarts the loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.config import StoreConfig
from commitgate.engine.consume_queue_store import ConsumeQueueStore, Ends
from commitgate.engine.file_handle_cache import FileHandleCache
from commitgate.engine.mapped_file import PAGE_SIZE, MappedFile
from commitgate.engine.supervision import Supervisor

log = logging.getLogger(__name__)

SYNCFS_THRESHOLD = 64


class FlushConsumeQueueService:
    def __init__(self, handles: FileHandleCache, checkpoint: StoreCheckpoint,
                 dispatched: Callable[[], int], queues: ConsumeQueueStore,
                 config: StoreConfig) -> None:
        self._handles = handles
        self._queues = queues
        self._checkpoint = checkpoint
        self._dispatched = dispatched
        self._interval = config.consumequeue_flush_interval_ms / 1000
        self._least_bytes = config.consumequeue_flush_least_pages * PAGE_SIZE
        self._thorough = config.consumequeue_flush_thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()
        self._stop = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="flush-consumequeue")
        self._task: asyncio.Task | None = None
        self._on_io_error: Callable[[str, BaseException], None] | None = None
        self.halted = False  # the store went offline: nothing is synced or recorded any more

    def start(self, supervisor: Supervisor,
              on_io_error: Callable[[str, BaseException], None]) -> None:
        self._on_io_error = on_io_error
        self._task = supervisor.spawn("flush-consumequeue", self._run, stop=self._stop)

    def halt(self) -> None:
        self.halted = True

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self.flush()
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._interval)
            await self.flush(thorough=time.monotonic() - self._last_thorough >= self._thorough)

    async def flush(self, *, thorough: bool = True) -> None:
        """Sync the files due (all of them when ``thorough``); a thorough round also records
        how far the queues are durable."""
        if self.halted:
            return
        dispatched = self._dispatched()
        drained = await self._queues.drain_gradually() if thorough else False
        ends = self._queues.ends_table() if drained else {}
        if thorough:
            self._last_thorough = time.monotonic()
        files, retired = self._handles.take_flush_work(0 if thorough else self._least_bytes)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._sync, files)
        except OSError as exc:
            self._on_io_error("fdatasync of ConsumeQueue files", exc)
            return
        finally:
            self._handles.finish_flush(retired)
        if not drained:  # the checkpoint may only claim units that are in the files
            return
        value = self._checkpoint.value
        value.consumequeue_flushed = dispatched
        value.logics_msg_timestamp = int(time.time() * 1000)
        try:
            await loop.run_in_executor(self._executor, self._save, ends)
        except OSError as exc:  # each save rewrites the whole of both: the next one mends it
            log.error("saving the checkpoint and ConsumeQueue ends failed (next round "
                      "again): %s", exc)

    def _save(self, ends: Ends) -> None:
        self._queues.save_ends(ends)
        self._checkpoint.save()

    def _sync(self, files: list[MappedFile]) -> None:
        if len(files) > SYNCFS_THRESHOLD:
            positions = [(mapped, mapped.wrote_position) for mapped in files]
            syncfs(files[0].path.parent)
            for mapped, position in positions:
                mapped.flushed_position = max(mapped.flushed_position, position)
            return
        for mapped in files:
            mapped.flush()


def syncfs(directory: Path) -> None:
    """Flush every dirty page of the filesystem holding ``directory`` (Linux syncfs(2))."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _LIBC is None:
            os.sync()
        elif _LIBC.syncfs(fd) != 0:  # an I/O error, not to be hidden by a sync(2) that says none
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs of {directory} failed: {os.strerror(code)}")
    finally:
        os.close(fd)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) \
    if ctypes.util.find_library("c") else None
