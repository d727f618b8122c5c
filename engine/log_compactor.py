"""LogCompactor: ``cleanup.policy=compact`` partitions keep the last record of every key.

Kafka's log cleaner over the shared CommitLog (docs/architecture.md, "The log's lifecycle").
A partition is cleaned when its dirty part (from its cleaner checkpoint, ``cleaned_offsets``
in the topic table, to the cleanable end) is at least ``min.cleanable.dirty.ratio`` of its
bytes, or its oldest dirty batch is older than ``max.compaction.lag.ms``. The cleanable end
stops before batches younger than ``min.compaction.lag.ms`` and before the last batch. A
cleaning maps every key of the dirty part to its last offset, then rewrites each batch from
the log start to the cleanable end that holds a superseded record (or a tombstone older than
``delete.retention.ms``): the kept records go into a batch with the same base offset, last
offset delta and producer fields, appended as a ``RELOCATED`` entry, and the batch's units
point at it once it is durable. A batch left with nothing is dropped: its offsets point at
the next batch kept, so a fetch there returns the next record. The old entries are dead from
then on; the CommitLogCleaner frees their segments. Units are synced before the checkpoint
moves, so a crash at any point leaves the partition readable and the cleaning repeatable.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from commitgate.engine.commit_log import body_of
from commitgate.engine.commit_log_cleaner import SLICE_S, CommitLogCleaner
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.status import StoreStatus
from commitgate.engine.store_parts import StoreParts
from commitgate.engine.topic_table import TopicRecord, cleanup_policy

log = logging.getLogger(__name__)

MAP_ENTRY_BYTES = 24  # as Kafka counts its offset map: a 16-byte key hash and an 8-byte offset
CHUNK_BYTES = 8 << 20  # rewritten batches made durable (one fdatasync) before units move


@dataclass(slots=True)
class Pointing:
    """Units of offsets [lo, hi) of a partition to point at an entry once it is durable."""

    lo: int
    hi: int
    phy: int
    size: int


class LogCompactor:
    def __init__(self, parts: StoreParts, cleaner: CommitLogCleaner) -> None:
        self._parts = parts
        self._logs = parts.logs
        self._config = parts.config
        self._cleaner = cleaner
        self._max_keys = max(1, parts.config.cleaner_dedupe_buffer_size // MAP_ENTRY_BYTES)
        self._clean_sizes: dict[tuple[str, int], tuple[int, int, int]] = {}  # start, end, bytes
        self.cleaned_partitions = 0
        self.rewritten_batches = 0
        self.dropped_batches = 0
        # the offset below which a partition holds no open transaction (its last stable offset),
        # set by the broker, which knows transactions: a record of an open transaction must not
        # replace an older value of its key (it may yet be aborted), as in Kafka's cleaner
        self.stable_end: Callable[[TopicRecord, int], int] | None = None
        # batches to treat as gone (records of aborted transactions), likewise set by the broker
        self.aborted_batch: Callable[[TopicRecord, int, memoryview], bool] | None = None

    def _setting(self, topic: TopicRecord, name: str, default: float) -> float:
        return float(topic.configs.get(name, default))

    async def run(self, now_ms: int) -> int:
        """Clean every compacted partition that is due; returns how many were cleaned."""
        cleaned = 0
        table = self._logs.table
        for topic in list(table.topics.values()):
            if "compact" not in cleanup_policy(topic, self._config):
                continue
            for partition in range(topic.partitions):
                if self._cleaner.stopping or table.get(topic.name) is not topic:
                    return cleaned
                window = self._due(topic, partition, now_ms)
                if window is not None and await self.clean(topic, partition, *window, now_ms):
                    cleaned += 1
        return cleaned

    # ---- when --------------------------------------------------------------------------------

    def _due(self, topic: TopicRecord, partition: int, now_ms: int) -> tuple[int, int] | None:
        """(first dirty offset, cleanable end) when the partition should be cleaned."""
        logs, config = self._logs, self._config
        queue = logs.queues.get(topic.name, partition)
        start, end = logs.log_start_offset(topic.name, partition), queue.max_offset
        if end - start < 2:
            return None
        dirty_from = max(topic.cleaned_offsets.get(partition, 0), start)
        lag = self._setting(topic, "min.compaction.lag.ms", config.min_compaction_lag_ms)
        last_base = logs.batch_base(queue, end - 1)
        young = queue.search_offset(lambda unit: unit[2] > now_ms - lag, dirty_from)
        cleanable_end = min(last_base, young)
        if self.stable_end is not None:
            cleanable_end = min(cleanable_end, self.stable_end(topic, partition))
        if cleanable_end <= dirty_from:
            return None
        max_lag = self._setting(topic, "max.compaction.lag.ms", config.max_compaction_lag_ms)
        if queue.get(dirty_from)[2] < now_ms - max_lag:
            return dirty_from, cleanable_end  # a dirty record waited too long
        dirty = logs.bytes_between(queue, dirty_from, cleanable_end)
        total = dirty + self._clean_bytes(topic, partition, start, dirty_from)
        ratio = self._setting(topic, "min.cleanable.dirty.ratio",
                              config.min_cleanable_dirty_ratio)
        return (dirty_from, cleanable_end) if total and dirty / total >= ratio else None

    def _clean_bytes(self, topic: TopicRecord, partition: int, start: int, end: int) -> int:
        """Bytes of the cleaned part [start, end), walked once per cleaning (a pass must not
        walk every compacted partition whole to find that nothing is due)."""
        key = (topic.topic_id, partition)
        cached = self._clean_sizes.get(key)
        if cached is None or cached[:2] != (start, end):
            queue = self._logs.queues.get(topic.name, partition)
            cached = (start, end, self._logs.bytes_between(queue, start, end))
            self._clean_sizes[key] = cached
        return cached[2]

    # ---- how ---------------------------------------------------------------------------------

    async def clean(self, topic: TopicRecord, partition: int, dirty_from: int, end: int,
                    now_ms: int) -> bool:
        table = self._logs.table
        queue = self._logs.queues.get(topic.name, partition)
        last, end = await self._offset_map(topic, queue, dirty_from, end)
        if end <= dirty_from:
            return False
        horizon = now_ms - self._setting(topic, "delete.retention.ms",
                                         self._config.delete_retention_ms)

        def keep(offset: int, key: bytes | None, tombstone: bool, timestamp: int) -> bool:
            if key is None:
                return True
            newest = last.get(_digest(key))
            if newest is not None and offset < newest:
                return False  # superseded
            return not (tombstone and timestamp < horizon)

        touched = await self._rewrite(topic, queue, end, keep)
        if touched is None or not await self._cleaner.sync_queue_files(touched):
            return False
        if table.get(topic.name) is topic:
            topic.cleaned_offsets[partition] = end
            table.save()
        self.cleaned_partitions += 1
        log.info("compaction: cleaned %s-%d up to offset %d (%d keys)", topic.name, partition,
                 end, len(last))
        return True

    async def _offset_map(self, topic: TopicRecord, queue: ConsumeQueue, dirty_from: int,
                          end: int) -> tuple[dict[bytes, int], int]:
        """Each key's last offset in [dirty_from, end), and where the map stopped (before end
        when it filled up, as Kafka's cleaner cleans in parts)."""
        logs, body_format = self._logs, self._parts.body_format
        last: dict[bytes, int] = {}
        deadline = time.monotonic() + SLICE_S
        offset = dirty_from
        for entry, after in logs.batch_entries(queue, dirty_from, end):
            if len(last) >= self._max_keys:
                return last, offset
            body = body_of(entry)
            if self._aborted(topic, queue.partition, body):
                offset = after
                continue
            for record_offset, key, _tombstone, _ts in body_format.record_keys(body):
                if key is not None:
                    last[_digest(key)] = record_offset
            offset = after
            if time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + SLICE_S
        return last, end

    def _aborted(self, topic: TopicRecord, partition: int, body: memoryview) -> bool:
        return self.aborted_batch is not None and self.aborted_batch(topic, partition, body)

    async def _rewrite(self, topic: TopicRecord, queue: ConsumeQueue, end: int, keep
                       ) -> set[Path] | None:
        """Rewrite the batches of [log start, end) through ``keep``; returns the queue files
        written (to sync), or None when it stopped on an error."""
        logs, body_format = self._logs, self._parts.body_format
        start = logs.log_start_offset(topic.name, queue.partition)
        touched: set[Path] = set()
        pending: list[Pointing] = []
        run_lo: int | None = None  # start of the offsets of dropped batches not yet pointed
        chunk_bytes, covered = 0, start
        deadline = time.monotonic() + SLICE_S
        dying: list[tuple[int, int]] = []  # old entries of this chunk's rewritten batches
        copies: list[tuple[int, int]] = []  # this chunk's new entries
        for entry, after in logs.batch_entries(queue, start, end):
            body = body_of(entry)
            result = None if self._aborted(topic, queue.partition, body) \
                else body_format.compact(body, keep)
            if result is None:  # nothing kept: its offsets point at the next batch kept
                run_lo = covered if run_lo is None else run_lo
                covered = after
                dying.append(_phy_and_size(entry))
                self.dropped_batches += 1
                continue
            if result is not body:
                copy = self._append(entry, result)
                if copy is None:
                    break
                copies.append(copy)
                dying.append(_phy_and_size(entry))
                pending.append(Pointing(covered if run_lo is None else run_lo, after, *copy))
                chunk_bytes += copy[1]
                self.rewritten_batches += 1
            elif run_lo is not None:
                pending.append(Pointing(run_lo, covered, *_phy_and_size(entry)))
            run_lo, covered = None, after
            if chunk_bytes >= CHUNK_BYTES:  # one fdatasync per chunk, not per slice
                if not await self._apply(topic, queue, pending, touched, dying, copies):
                    return None
                await self._cleaner.throttle(chunk_bytes)
                pending, chunk_bytes, dying, copies = [], 0, [], []
                deadline = time.monotonic() + SLICE_S
            elif time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + SLICE_S
            if self._cleaner.stopping:
                self._bury(copies)
                return None
        else:
            if run_lo is not None:  # the batch at ``end`` takes the last dropped offsets
                phy, size, _ = queue.get(end)
                pending.append(Pointing(run_lo, end, phy, size))
            if await self._apply(topic, queue, pending, touched, dying, copies):
                await self._cleaner.throttle(chunk_bytes)
                return touched
            return None
        self._bury(copies)  # a copy could not be written: what this chunk made is garbage
        return None

    def _bury(self, entries: list[tuple[int, int]]) -> None:
        for phy, size in entries:
            self._logs.commit_log.ledger.died(phy, size)

    def _append(self, entry: memoryview, body: bytes) -> tuple[int, int] | None:
        """Append a rewritten batch as a copy of ``entry``: (phy, size), or None."""
        req, _ = self._logs.commit_log.decode(_phy_and_size(entry)[0], check_crc=False)
        return self._cleaner.copy_entry(req, body)

    async def _apply(self, topic: TopicRecord, queue: ConsumeQueue, pending: list[Pointing],
                     touched: set[Path], dying: list[tuple[int, int]],
                     copies: list[tuple[int, int]]) -> bool:
        """Make the rewritten batches durable, then point the units at them; the old entries
        are dead then (or, on failure, the copies are)."""
        if not pending:
            self._bury(dying)
            return True
        status = await self._parts.flush_service.sync_to(self._logs.commit_log.max_offset)
        if status is not StoreStatus.OK:
            log.error("compaction: %s-%d: the cleaned batches could not be synced (%s)",
                      topic.name, queue.partition, status.value)
            self._bury(copies)
            return False
        if self._logs.table.get(topic.name) is not topic:
            return False  # deleted meanwhile (the ledger was invalidated with it)
        try:
            if pending[-1].hi > queue.pending_from:
                queue.drain()
            for pointing in pending:
                touched.update(queue.point_at(max(pointing.lo, queue.min_offset), pointing.hi,
                                              pointing.phy, pointing.size))
        except OSError as exc:
            log.error("compaction: %s-%d: pointing units at the cleaned batches failed: %s",
                      topic.name, queue.partition, exc)
            self._bury(copies)
            return False
        self._bury(dying)
        return True


def _digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


def _phy_and_size(entry: memoryview) -> tuple[int, int]:
    """PHYSICALOFFSET and TOTALSIZE of a whole CommitLog entry."""
    return int.from_bytes(entry[28:36], "big"), int.from_bytes(entry[0:4], "big")
