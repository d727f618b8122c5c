"""PartitionSizes: each partition's bytes in the CommitLog, as DescribeLogDirs reports them,
kept as counters instead of a walk of every batch per request.

A partition's size is the bytes of the CommitLog entries holding its batches from the one that
holds its log start on. Walking them costs a step per batch (seconds for a big partition), so
a partition is walked once, at its first request after a start (in slices, the event loop
going on between them), and counted from then on: every batch dispatched to it adds its
entry's bytes to a running total (a dispatch listener: an add and a compare per batch, nothing
per record), and every MARK_BYTES a mark (offset, total before it) is kept. The size is the
total less the bytes before the log start: the last mark (or answer) at or below the start
plus the batches from there up to the start, read from their ConsumeQueue units (at most
MARK_BYTES of batches, once per start; the units stay after the cleaner deleted the entries).
When the units are gone too, the mark alone answers: too large by less than MARK_BYTES, where
Kafka's own answer counts every byte of the segments its log start lies in.

A compaction rewrites batches (the topic's cleaned offset moves), a failed append cuts the
queue back, a deleted or rebuilt partition comes with a new queue: each makes the partition
walked again at its next request.
"""
from __future__ import annotations

import asyncio
import bisect
from dataclasses import dataclass, field

from commitgate.engine.commit_log import DispatchRequest
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.partition_logs import PartitionLogs
from commitgate.engine.queue_core import CQ_UNIT, UNIT_SIZE

MARK_BYTES = 1 << 20
SLICE_BATCHES = 4096  # batches walked between two turns of the event loop
UNIT_BLOCK = 4096  # units read at a time


@dataclass(slots=True)
class _Count:
    queue: ConsumeQueue  # its identity: a deleted or rebuilt partition has a new one
    cleaned: int | None  # the topic's cleaned offset of the partition when walked
    end: int  # the offset after the last batch counted
    total: int = 0  # bytes of the batches counted
    marks: list[tuple[int, int]] = field(default_factory=list)  # (offset, total before it)
    next_mark: int = MARK_BYTES  # the total at which the next mark is kept
    start: int = -1  # the log start of the last answer ...
    before: int = 0  # ... and the bytes below it

    def add(self, size: int, after: int) -> None:
        total = self.total
        if total >= self.next_mark:
            self.marks.append((self.end, total))
            self.next_mark = total + MARK_BYTES
        self.total = total + size
        self.end = after


class PartitionSizes:
    def __init__(self, logs: PartitionLogs) -> None:
        self._logs = logs
        self._counts: dict[tuple[str, int], _Count] = {}
        self._lock = asyncio.Lock()  # one request walks a partition at a time

    def on_dispatch(self, req: DispatchRequest) -> None:
        """A batch was appended (or replayed) to its partition: count it there."""
        if not self._counts:  # no DescribeLogDirs since the start: nothing to count
            return
        count = self._counts.get((req.topic, req.partition))
        if count is not None:
            count.add(req.size, req.queue_offset + req.offset_count)

    def moved(self, topic: str, partition: int, start: int) -> None:
        """The partition's log start moved to ``start``: count what fell below it now, while
        its units are sure to be there (a read of at most MARK_BYTES of batches' units)."""
        count = self._current(topic, partition)
        if count is not None and count.start != start:
            count.before, count.start = self._bytes_before(count, start), start

    def forget(self, topic: str) -> None:
        """Drop the counts of a deleted topic."""
        for key in [key for key in self._counts if key[0] == topic]:
            del self._counts[key]

    async def size(self, topic: str, partition: int) -> int:
        """The partition's bytes from the batch holding its log start on; -1 when unknown."""
        logs = self._logs
        start = logs.log_start_offset(topic, partition)
        if start < 0:
            return -1
        async with self._lock:
            count = self._current(topic, partition)
            if count is None:
                count = await self._walk(topic, partition, start)
            start = logs.log_start_offset(topic, partition)  # it may move while walking
            if count.start != start:  # the first answer, or the queue's files below it went
                count.before, count.start = self._bytes_before(count, start), start
            return max(count.total - count.before, 0)

    def _current(self, topic: str, partition: int) -> _Count | None:
        """The partition's count when it still holds, else None (and it is dropped)."""
        key = (topic, partition)
        count = self._counts.get(key)
        if count is None:
            return None
        record = self._logs.table.get(topic)
        if record is not None and count.queue is self._logs.queues.get(topic, partition) and \
                count.queue.max_offset == count.end and \
                count.cleaned == record.cleaned_offsets.get(partition):
            return count
        del self._counts[key]
        return None

    async def _walk(self, topic: str, partition: int, start: int) -> _Count:
        """Count the partition from ``start`` to its end, a slice at a time; kept (and then
        counted by ``on_dispatch``) only when every entry was there to read."""
        logs = self._logs
        queue = logs.queues.get(topic, partition)
        record = logs.table.get(topic)
        count = _Count(queue, record.cleaned_offsets.get(partition), start, marks=[(start, 0)],
                       next_mark=MARK_BYTES)
        while count.end < queue.max_offset:  # appends during a turn of the loop come next
            if not self._walk_slice(count):
                return count  # an entry is gone (a segment deleted): walked again next time
            await asyncio.sleep(0)
            if logs.table.get(topic) is not record or logs.queues.get(topic, partition) \
                    is not queue:
                return count  # deleted or rebuilt meanwhile
        if count.cleaned == record.cleaned_offsets.get(partition):
            self._counts[(topic, partition)] = count
        return count

    def _walk_slice(self, count: _Count) -> bool:
        """Count up to SLICE_BATCHES batches from ``count.end``; False when an entry is gone."""
        end = count.queue.max_offset
        batches = self._logs.batch_entries(count.queue, count.end, end)
        for walked, (entry, after) in enumerate(batches, 1):
            count.add(len(entry), after)
            if walked == SLICE_BATCHES:
                return True
        return count.end >= end

    def _bytes_before(self, count: _Count, start: int) -> int:
        """Bytes of the counted batches that end at or below ``start``: from the last mark or
        answer below it, adding the batches up to it by their units (the ConsumeQueue holds
        them after the cleaner deleted their entries)."""
        at = bisect.bisect_right(count.marks, start, key=lambda mark: mark[0]) - 1
        del count.marks[:max(at, 0)]  # the marks below are not needed again
        offset, before = count.marks[0]
        if count.start <= start and count.start > offset:
            offset, before = count.start, count.before
        if offset >= start:
            return before if offset == start else 0
        ended = _ended_bytes(count.queue, offset, start)
        return before if ended is None else before + ended


def _ended_bytes(queue: ConsumeQueue, lo: int, hi: int) -> int | None:
    """Bytes of the batches with units in [lo, hi) that end at or below ``hi``, from their
    units (every unit of a batch names its entry and size); None when the units are gone."""
    if lo < queue.min_offset:
        return None
    total, phy_seen, size_seen = 0, -1, 0
    offset = lo
    try:
        while offset < hi:
            block = queue.units(min(UNIT_BLOCK, hi - offset), offset)
            if not block:
                break
            for phy, size, _ in CQ_UNIT.iter_unpack(block):
                if phy != phy_seen:  # a new batch: the one before ended
                    total += size_seen
                    phy_seen, size_seen = phy, size
            offset += len(block) // UNIT_SIZE
        if hi >= queue.max_offset or queue.get(hi)[0] != phy_seen:
            total += size_seen  # the last batch ends at hi too
    except IndexError:  # a file of units a rebuild left out
        return None
    return total
