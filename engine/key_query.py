"""Query by key: the batches of a topic that hold a key, found through the IndexFiles.

The IndexBuilder puts ``topic#key`` with each entry's CommitLog offset and store time, so a
query reads only the CommitLog entries the index points to: one entry per hit, whatever the
size of the partition (RocketMQ's queryMessage). The time range is the store time (when the
broker appended the batch): the IndexFile keeps it to the second, and the entry's header
narrows it to the millisecond. Which records of a batch hold the key is the body's business
(Kafka framing): the caller decodes the bodies.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from commitgate.engine.commit_log import body_of
from commitgate.engine.partition_logs import PartitionLogs
from commitgate.engine.store_parts import StoreParts


@dataclass(slots=True)
class KeyBatch:
    partition: int
    base_offset: int
    store_timestamp: int  # ms, when the broker appended the batch
    log_start: int  # the partition's log start offset: records below it are deleted
    body: memoryview  # a view of the CommitLog mapping (pins it while it lives)


@dataclass(slots=True)
class KeyBatches:
    batches: list[KeyBatch] = field(default_factory=list)
    index_hits: int = 0  # CommitLog offsets the IndexFiles gave (hash matches)
    entries_read: int = 0  # CommitLog entries read for them: never more than the hits


async def find_key(parts: StoreParts | None, topic: str, key: bytes, begin_ms: int,
                   end_ms: int, max_count: int) -> KeyBatches:
    """``key_batches`` on a thread, once the IndexBuilder has (boundedly) caught up with what
    was appended before the call: the IndexFiles and CommitLog are mappings whose pages may
    have to come from disk. ``parts`` is None before the store is open."""
    if parts is None or not parts.index.enabled:
        return KeyBatches()
    await parts.index.catch_up(parts.dispatcher.dispatched_offset)
    return await asyncio.to_thread(key_batches, parts, topic, key, begin_ms, end_ms, max_count)


def key_batches(parts: StoreParts, topic: str, key: bytes, begin_ms: int, end_ms: int,
                max_count: int) -> KeyBatches:
    """Up to ``max_count`` batches of ``topic`` that may hold ``key``, stored in
    [begin_ms, end_ms], newest first, each once (a batch the CommitLog cleaner relocated is
    indexed twice until its old segment goes)."""
    result = KeyBatches()
    phys = parts.index.query(topic.encode() + b"#" + key, begin_ms, end_ms, max_count)
    result.index_hits = len(phys)
    seen: set[tuple[int, int]] = set()
    for phy in phys:
        found = _batch_at(parts.logs, topic, phy, begin_ms, end_ms)
        result.entries_read += 1
        if found is not None and (found.partition, found.base_offset) not in seen:
            seen.add((found.partition, found.base_offset))
            result.batches.append(found)
    return result


def _batch_at(logs: PartitionLogs, topic: str, phy: int, begin_ms: int, end_ms: int
              ) -> KeyBatch | None:
    """The batch at CommitLog offset ``phy`` when it is ``topic``'s, live and in the range."""
    req, size = logs.commit_log.decode(phy, check_crc=False)
    if req is None or req.topic != topic or not begin_ms <= req.store_timestamp <= end_ms:
        return None
    record = logs.table.get(topic)
    if record is None or req.partition >= record.partitions or phy < record.created_phy:
        return None  # a deleted topic, or an earlier topic of the same name
    log_start = logs.log_start_offset(topic, req.partition)
    if req.queue_offset + req.offset_count <= log_start:
        return None  # every record of the batch lies below the log start
    entry = logs.commit_log.entry(phy, size)
    if entry is None:
        return None
    return KeyBatch(req.partition, req.queue_offset, req.store_timestamp, log_start,
                    body_of(entry))
