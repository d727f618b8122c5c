"""RecordSearch: the record-level part of a ListOffsets lookup by timestamp.

``timestamp_search`` finds the batch to look into on the event loop (a binary search over the
ConsumeQueue units' running maximum of batch timestamps: no batch is read on the way); reading
its records (decompressing it) is ``run``, which the gateway hands to a thread. The body is a
view of the CommitLog mapping, which stays open while a view of it lives.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.commit_log import COUNT_AND_BASE, body_of
from commitgate.engine.partition_logs import PartitionLogs

Found = tuple[int, int] | None  # (offset, timestamp)


@dataclass(slots=True)
class RecordSearch:
    body: memoryview | None  # the batch to decode; None: no record qualifies
    search: Callable[[memoryview], Found] | None = None
    next_offset: int | None = None  # the batch to try next when this one has no answer

    def run(self) -> Found:
        return None if self.body is None else self.search(self.body)


NOTHING = RecordSearch(None)


def timestamp_search(logs: PartitionLogs, body_format: BodyFormat, topic: str, partition: int,
                     timestamp: int | None, offset: int) -> RecordSearch:
    """The batch holding the first record at or after ``timestamp`` from ``offset`` on
    (None: the record with the largest timestamp)."""
    queue, _ = logs.queue(topic, partition)
    if queue is None:
        return NOTHING
    start = max(logs.log_start(queue), offset)
    target = queue.last_tags if timestamp is None else timestamp
    first = queue.search_offset(lambda unit: unit[2] >= target, start)
    phy, size, _ = queue.get(first) if first < queue.max_offset else (0, 0, 0)
    entry = logs.commit_log.entry(phy, size) if size else None
    if entry is None:
        return NOTHING
    body = body_of(entry)
    if timestamp is None:
        return RecordSearch(body, body_format.max_timestamp_offset)
    # found at the start: the running maximum may come from below it, and the batch may
    # hold the start with its qualifying records below: the next batch may be needed
    count, base = COUNT_AND_BASE.unpack_from(entry, 16)
    return RecordSearch(body, lambda b: body_format.offset_for_timestamp(b, timestamp, start),
                        max(base + count, first + 1) if first == start else None)


def timestamp_searches(logs: PartitionLogs, body_format: BodyFormat, topic: str, partition: int,
                       timestamp: int) -> Iterator[RecordSearch]:
    """The batches to decode, in turn, until one has a record at or after ``timestamp``
    (at or past the log start): the first whose max timestamp reaches it, found by a binary
    search over the units' running maximum; the ones after only when the first held the
    log start and had no such record past it (then they are read as Kafka scans on)."""
    offset = -1
    while offset is not None:
        search = timestamp_search(logs, body_format, topic, partition, timestamp, offset)
        if search.body is None:
            return
        yield search
        offset = search.next_offset
