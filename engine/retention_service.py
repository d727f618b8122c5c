"""RetentionService: advances log start offsets and deletes what no partition needs any more.

Logical retention is Kafka's: per-topic ``retention.ms`` (by the batches' running max
timestamp) and ``retention.bytes`` move a partition's log start offset forward, as DeleteRecords
does. Physical deletion is RocketMQ's: whole CommitLog segments go once they hold nothing above
any partition's log start, or (optional) once older than ``file_reserved_time_ms``, or when the
disk is fuller than ``disk_max_used_space_ratio`` (oldest first, logged loudly). ConsumeQueue
and IndexFiles wholly below what remains follow.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from typing import TYPE_CHECKING

from engine.config import StoreConfig

if TYPE_CHECKING:
    from engine.consume_queue import ConsumeQueue
    from engine.message_store import MessageStore

log = logging.getLogger(__name__)


class RetentionService:
    def __init__(self, store: MessageStore, config: StoreConfig) -> None:
        self._store = store
        self._config = config
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._zombies: list = []  # deleted segments still read by in-flight responses

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="retention")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        interval = self._config.retention_check_interval_ms / 1000
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)
            if not self._stop.is_set():
                try:
                    self.run_once()
                except OSError as exc:
                    log.error("retention: %s", exc)

    def run_once(self, now_ms: int | None = None) -> int:
        """One pass; returns how many CommitLog segments were deleted."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        changed = False
        for topic in self._store.topics():
            for partition in range(topic.partitions):
                changed |= self._apply_topic_retention(topic.name, partition, topic.configs, now_ms)
        deleted = self._delete_segments(now_ms)
        if deleted:
            changed |= self._follow_commitlog_start()
        if changed:
            self._store.table.save()
        self._zombies = [m for m in self._zombies if not m.close()]
        return deleted

    def _apply_topic_retention(self, topic: str, partition: int, configs: dict[str, str],
                               now_ms: int) -> bool:
        store = self._store
        queue = store.queues.get(topic, partition)
        start, end = store.log_start_offset(topic, partition), queue.max_offset
        if start >= end:
            return False
        target = start
        retention_ms = int(configs.get("retention.ms", self._config.log_retention_ms))
        if retention_ms >= 0:
            cutoff = now_ms - retention_ms
            target = queue.search_offset(lambda unit: unit[2] >= cutoff, start)
        retention_bytes = int(configs.get("retention.bytes", self._config.log_retention_bytes))
        if retention_bytes >= 0:
            target = max(target, _offset_keeping_bytes(queue, start, retention_bytes))
        if target <= start:
            return False
        log.info("retention: %s-%d log start offset %d -> %d", topic, partition, start, target)
        store.advance_log_start(topic, partition, target)
        return True

    def _delete_segments(self, now_ms: int) -> int:
        files = self._store.commit_log.queue.files
        needed = self._lowest_needed_phy()
        deleted = 0
        while len(files) > 1 and self._deletable(files[0], needed, now_ms):
            mapped = files.pop(0)
            log.info("retention: deleting CommitLog segment %s", mapped.path)
            if not mapped.destroy():
                self._zombies.append(mapped)
            deleted += 1
        if deleted:
            self._store.index.service.delete_files_below(self._store.commit_log.min_offset)
        return deleted

    def _deletable(self, mapped, needed: int, now_ms: int) -> bool:
        if mapped.end_offset <= needed:
            return True
        reserved = self._config.file_reserved_time_ms
        if reserved >= 0 and now_ms - os.stat(mapped.path).st_mtime * 1000 > reserved:
            log.warning("retention: %s is older than fileReservedTime", mapped.path)
            return True
        usage = shutil.disk_usage(mapped.path)
        if usage.used / usage.total > self._config.disk_max_used_space_ratio:
            log.warning("retention: disk %.0f%% full (limit %.0f%%): deleting %s", 100 *
                        usage.used / usage.total, 100 * self._config.disk_max_used_space_ratio,
                        mapped.path)
            return True
        return False

    def _lowest_needed_phy(self) -> int:
        """The lowest CommitLog offset that some partition still serves."""
        store = self._store
        needed = store.commit_log.max_offset
        for topic in store.topics():
            for partition in range(topic.partitions):
                queue = store.queues.get(topic.name, partition)
                start = store.log_start_offset(topic.name, partition)
                if start < queue.max_offset:
                    needed = min(needed, queue.get(start)[0])
        return needed

    def _follow_commitlog_start(self) -> bool:
        """After segments went, move log starts past batches that no longer exist."""
        store = self._store
        lowest = store.commit_log.min_offset
        changed = False
        for topic in store.topics():
            for partition in range(topic.partitions):
                queue = store.queues.get(topic.name, partition)
                start = store.log_start_offset(topic.name, partition)
                first = queue.search_offset(lambda unit: unit[0] >= lowest, start)
                if first > start:
                    log.warning("retention: %s-%d lost offsets %d..%d with their CommitLog "
                                "segments", topic.name, partition, start, first - 1)
                    store.advance_log_start(topic.name, partition, first)
                    changed = True
        return changed


def _offset_keeping_bytes(queue: ConsumeQueue, start: int, limit: int) -> int:
    """The smallest batch-aligned offset from which the partition holds at most ``limit`` bytes."""
    kept = 0
    offset = queue.max_offset
    while offset > start:
        phy, size, _ = queue.get(offset - 1)
        first = queue.search_offset(lambda unit, phy=phy: unit[0] >= phy, start)
        if kept + size > limit:
            return offset
        kept += size
        offset = first
    return start
