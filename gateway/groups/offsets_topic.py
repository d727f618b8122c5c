"""The internal ``__consumer_offsets`` topic: where the group coordinator makes committed
offsets and group metadata durable, as Kafka does, through the same CommitLog as every batch.

A group lives in partition ``abs(java hashCode(group id)) % offsets.topic.num.partitions`` (Kafka's
rule), so the records of one group are in order. Writes are one RecordBatch per request
(built like a producer's), appended through ``MessageStore.append``; callers answer their
client once ``wait_durable`` says the batch is as durable as an acks=-1 produce. At start the
topic is read from its log start and replayed, last record per key winning (what Kafka's
compaction would keep).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from engine import MessageStore, StoreStatus
from engine.status import AppendResult
from protocol.errors import ErrorCode
from protocol.record_batch import build_batch, decode_records

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"  # Kafka's; refused by name before it exists
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}
READ_CHUNK = 1 << 20

# Kafka's mapping of log append errors to commit errors (GroupMetadataManager)
APPEND_ERRORS = {
    StoreStatus.ENTRY_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    StoreStatus.STORE_CLOSED: ErrorCode.NOT_COORDINATOR,
    StoreStatus.DISK_ERROR: ErrorCode.NOT_COORDINATOR,  # Kafka's KAFKA_STORAGE_ERROR case
}


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def internal_refusal(topic: str, action: str) -> str:
    """The message of a client request refused because ``topic`` is internal."""
    return (f"Topic '{topic}' is an internal topic of the broker's coordinators: clients may "
            f"not {action} it.")


def java_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class OffsetsTopic:
    def __init__(self, store: MessageStore, partitions: int) -> None:
        self.store = store
        self.partitions = partitions
        self.replayed = 0  # records the last replay read

    def partition_for(self, group_id: str) -> int:
        return (java_hash(group_id) & 0x7FFFFFFF) % self.partitions

    def ensure(self) -> StoreStatus:
        """Create the topic on first use, as Kafka does."""
        if self.store.topic(OFFSETS_TOPIC) is not None:
            return StoreStatus.OK
        result = self.store.create_topic(OFFSETS_TOPIC, self.partitions, TOPIC_CONFIGS)
        if result.status is StoreStatus.OK:
            log.info("created %s with %d partitions", OFFSETS_TOPIC, self.partitions)
        return result.status

    async def write(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                    apply: Callable[[], None]) -> ErrorCode:
        """Append (key, value) records of one group, call ``apply`` once they are in the log
        (so memory changes in log order), return once they are durable."""
        if not records:
            apply()
            return ErrorCode.NONE
        status = self.ensure()
        if status is StoreStatus.OK:
            appended = self._append(group_id, records)
            status = appended.status
            if status is StoreStatus.OK:
                apply()
                status = await self.store.wait_durable(appended.phy_end)
        if status is not StoreStatus.OK:
            log.warning("writing %d records of group %r to %s failed: %s", len(records),
                        group_id, OFFSETS_TOPIC, status)
            return APPEND_ERRORS.get(status, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return ErrorCode.NONE

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> AppendResult:
        now = int(time.time() * 1000)
        body = bytearray(build_batch([(key, value, (), now) for key, value in records]))
        return self.store.append(OFFSETS_TOPIC, self.partition_for(group_id), memoryview(body),
                                 offset_count=len(records), max_timestamp=now)

    def replay(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) stored, partition by partition, in log order (counted in
        ``replayed``: compaction keeps it near the live keys)."""
        self.replayed = 0
        if self.store.topic(OFFSETS_TOPIC) is None:
            return
        for partition in range(self.store.topic(OFFSETS_TOPIC).partitions):
            yield from self._replay_partition(partition)

    def _replay_partition(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        offset = self.store.log_start_offset(OFFSETS_TOPIC, partition)
        end = self.store.log_end_offset(OFFSETS_TOPIC, partition)
        while offset < end:
            read = self.store.read(OFFSETS_TOPIC, partition, offset, READ_CHUNK)
            if read.status is not StoreStatus.OK or read.next_offset <= offset:
                log.error("replaying %s-%d stopped at offset %d: %s", OFFSETS_TOPIC, partition,
                          offset, read.status)
                return
            for buffer in read.buffers:
                for record in decode_records(buffer):
                    if record.offset >= offset and record.key is not None:
                        self.replayed += 1
                        yield record.key, record.value
            offset = read.next_offset
