"""FlushConsumeQueueService: syncs dirty ConsumeQueue files, then saves the checkpoint.

ConsumeQueues are derived state, so they are synced on a relaxed timer. The checkpoint's
``consumequeue_flushed`` only moves after the files covering it are on disk; recovery after a
crash re-dispatches from there. With thousands of partitions, one fdatasync per dirty file
would take seconds, so above ``SYNCFS_THRESHOLD`` dirty files a single syncfs(2) of the data
directory's filesystem does the same work in one call.
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

from engine.checkpoint import StoreCheckpoint
from engine.file_handle_cache import FileHandleCache
from engine.mapped_file import MappedFile

log = logging.getLogger(__name__)

SYNCFS_THRESHOLD = 64


class FlushConsumeQueueService:
    def __init__(self, handles: FileHandleCache, checkpoint: StoreCheckpoint,
                 dispatched: Callable[[], int], interval_ms: int) -> None:
        self._handles = handles
        self._checkpoint = checkpoint
        self._dispatched = dispatched
        self._interval = interval_ms / 1000
        self._stop = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="flush-consumequeue")
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="flush-consumequeue")

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
            await self.flush()

    async def flush(self) -> None:
        """Sync what is dirty now and record how far the queues are durable."""
        dispatched = self._dispatched()
        files, retired = self._handles.take_flush_work()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._sync, files)
        except OSError as exc:
            log.error("ConsumeQueue flush failed: %s", exc)
            for mapped in files:  # try again next round
                if mapped not in retired:
                    self._handles.mark_dirty(mapped)
            return
        finally:
            self._handles.finish_flush(retired)
        value = self._checkpoint.value
        value.consumequeue_flushed = dispatched
        value.logics_msg_timestamp = int(time.time() * 1000)
        await loop.run_in_executor(self._executor, self._checkpoint.save)

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
        if _LIBC is None or _LIBC.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) \
    if ctypes.util.find_library("c") else None
