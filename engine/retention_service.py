"""RetentionService: moves log start offsets, then lets the CommitLog cleaner free the disk.

Logical retention is Kafka's: per-topic ``retention.ms`` (by the batches' running max
timestamp) and ``retention.bytes`` move a partition's log start offset forward, as
DeleteRecords does. Physical deletion is the CommitLogCleaner's: a segment goes once nothing
live is left in it, and the live entries of the oldest are relocated when the log holds too
much garbage or the disk is full. Nothing is deleted by age or disk usage alone. A pass runs
every ``retention_check_interval_ms``, and at once when a write was refused for space; none
while the store is offline (the cleaner writes copies and syncs them).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from commitgate.engine.commit_log import COUNT_AND_BASE, CommitLog
from commitgate.engine.commit_log_cleaner import CommitLogCleaner
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.log_compactor import LogCompactor
from commitgate.engine.store_parts import StoreParts
from commitgate.engine.topic_table import cleanup_policy

log = logging.getLogger(__name__)

PRESSURE_RETRY_S = 1.0  # how often a pass runs while writes are refused for space


class RetentionService:
    def __init__(self, parts: StoreParts) -> None:
        self._parts = parts
        self._logs = parts.logs
        self._config = parts.config
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.cleaner = CommitLogCleaner(parts)
        self.compactor = LogCompactor(parts, self.cleaner)

    def start(self) -> None:
        self._task = self._parts.supervisor.spawn("retention", self._run, stop=self._stop)

    def wake(self) -> None:
        """Run a pass now (a write was refused for space)."""
        self._wake.set()

    async def stop(self) -> None:
        self._stop.set()
        self.cleaner.stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        self.cleaner.close()

    async def _run(self) -> None:
        interval = self._config.retention_check_interval_ms / 1000
        commit_log = self._logs.commit_log
        while not self._stop.is_set():
            # while writes are refused for space, look every PRESSURE_RETRY_S; a deleted
            # topic or DeleteRecords wakes it sooner
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(),
                                       PRESSURE_RETRY_S if commit_log.refusing else interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._parts.offline_reason():
                continue
            try:
                await self.run_once(pressure=commit_log.refusing)
            except Exception:  # logged with its traceback; the next pass tries again
                log.exception("retention pass failed; retrying in %.0f s", interval)
            commit_log.recheck_space()

    async def run_once(self, now_ms: int | None = None, *, pressure: bool = False) -> int:
        """One pass; returns how many CommitLog segments were deleted."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        changed = False
        for topic in list(self._logs.table.topics.values()):
            if "delete" not in cleanup_policy(topic, self._config):
                continue  # compacted only: Kafka deletes nothing by time or size
            for partition in range(topic.partitions):
                changed |= self._apply_topic_retention(topic.name, partition, topic.configs, now_ms)
        if changed:
            self._logs.table.save()
        self.cleaner.start_pass()
        await self.compactor.run(now_ms)
        return await self.cleaner.clean(pressure=pressure)

    def _apply_topic_retention(self, topic: str, partition: int, configs: dict[str, str],
                               now_ms: int) -> bool:
        logs = self._logs
        queue = logs.queues.get(topic, partition)
        start, end = logs.log_start_offset(topic, partition), queue.max_offset
        if start >= end:
            return False
        target = start
        retention_ms = int(configs.get("retention.ms", self._config.log_retention_ms))
        if retention_ms >= 0:
            cutoff = now_ms - retention_ms
            target = queue.search_offset(lambda unit: unit[2] >= cutoff, start)
        retention_bytes = int(configs.get("retention.bytes", self._config.log_retention_bytes))
        if retention_bytes >= 0:
            target = max(target, _offset_keeping_bytes(logs.commit_log, queue, start,
                                                       retention_bytes))
        if target <= start:
            return False
        log.info("retention: %s-%d log start offset %d -> %d", topic, partition, start, target)
        logs.advance_log_start(topic, partition, target)
        return True


def _offset_keeping_bytes(commit_log: CommitLog, queue: ConsumeQueue, start: int, limit: int
                          ) -> int:
    """The smallest batch-aligned offset from which the partition holds at most ``limit`` bytes
    (a batch's first offset comes from its entry: relocated units are not ordered by phy)."""
    kept = 0
    offset = queue.max_offset
    while offset > start:
        phy, size, _ = queue.get(offset - 1)
        entry = commit_log.entry(phy, size)
        first = COUNT_AND_BASE.unpack_from(entry, 16)[1] if entry is not None else offset - 1
        if first >= offset:  # offsets compaction removed, pointing at the batch after them
            first = queue.run_start(offset, phy)
        first = max(first, start)
        if kept + size > limit:
            return offset
        kept += size
        offset = first
    return start
