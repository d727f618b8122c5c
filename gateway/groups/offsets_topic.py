"""The internal ``__consumer_offsets`` topic: where the group coordinator makes committed
offsets and group metadata durable, as Kafka does, through the same CommitLog as every batch.

A group lives in partition ``abs(java hashCode(group id)) % offsets.topic.num.partitions`` (Kafka's
rule), so the records of one group are in order. Writes are one RecordBatch per request
(built like a producer's), appended through ``MessageStore.append``; callers answer their
client once ``wait_durable`` says the batch is as durable as an acks=-1 produce. TxnOffsetCommit
writes a transactional batch (the producer's id and epoch) and the transaction's end a COMMIT
or ABORT control batch, as Kafka's coordinator and WriteTxnMarkers do. At start the topic is
read from its log start and replayed, last record per key winning (what Kafka's compaction
would keep), with the transactional batches and markers in log order.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

from commitgate.engine import MessageStore, StoreStatus
from commitgate.engine.status import AppendResult
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    BatchHeader,
    build_batch,
    build_control_batch,
    control_type,
    decode_records,
    iter_batch_headers,
    read_header,
)

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


class Replayed(NamedTuple):
    """One record of the offsets topic, or one transaction marker (then key and value are
    None)."""

    partition: int
    offset: int
    producer_id: int  # the transactional batch's producer; -1 for a plain record
    key: bytes | None
    value: bytes | None
    marker: int | None = None  # CONTROL_COMMIT or CONTROL_ABORT


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
        # told of every batch appended (partition, body, result): the broker feeds transactional
        # batches and markers to the producer state, which keeps each partition's stable offset
        self.appended: Callable[[int, bytes, AppendResult], None] | None = None

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
        return await self.write_records(group_id, records, lambda _offset: apply())

    async def write_records(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                            apply: Callable[[int], None], producer_id: int = -1,
                            producer_epoch: int = -1) -> ErrorCode:
        """As ``write``, ``apply`` getting the log offset of the first record (-1 when there
        is none); a producer id makes the batch transactional (TxnOffsetCommit)."""
        if not records:
            apply(-1)
            return ErrorCode.NONE
        now = int(time.time() * 1000)
        body = build_batch([(key, value, (), now) for key, value in records],
                           producer_id=producer_id, producer_epoch=producer_epoch,
                           transactional=producer_id >= 0)
        return await self._write(self.partition_for(group_id), body, apply,
                                 f"{len(records)} records of group {group_id!r}")

    async def write_marker(self, partition: int, commit: bool, producer_id: int,
                           producer_epoch: int, apply: Callable[[], None]) -> ErrorCode:
        """Append a COMMIT or ABORT marker of the producer's transaction to the partition,
        call ``apply`` once it is in the log, return once it is durable."""
        body = build_control_batch(commit, producer_id, producer_epoch, int(time.time() * 1000))
        return await self._write(partition, body, lambda _offset: apply(),
                                 f"the {'commit' if commit else 'abort'} marker of producer "
                                 f"{producer_id}")

    async def _write(self, partition: int, body: bytes, apply: Callable[[int], None],
                     what: str) -> ErrorCode:
        status = self.ensure()
        if status is StoreStatus.OK:
            appended = self._append(partition, body)
            status = appended.status
            if status is StoreStatus.OK:
                apply(appended.base_offset)
                status = await self.store.wait_durable(appended.phy_end)
        if status is not StoreStatus.OK:
            log.warning("writing %s to %s-%d failed: %s", what, OFFSETS_TOPIC, partition, status)
            return APPEND_ERRORS.get(status, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return ErrorCode.NONE

    def _append(self, partition: int, body: bytes) -> AppendResult:
        header = read_header(body)
        result = self.store.append(OFFSETS_TOPIC, partition, memoryview(bytearray(body)),
                                   offset_count=header.offset_count,
                                   max_timestamp=header.max_timestamp, sys_flag=header.attributes)
        if result.status is StoreStatus.OK and self.appended is not None:
            self.appended(partition, body, result)
        return result

    def replay(self) -> Iterator[Replayed]:
        """Every record and transaction marker stored, partition by partition, in log order
        (records counted in ``replayed``: compaction keeps it near the live keys)."""
        self.replayed = 0
        if self.store.topic(OFFSETS_TOPIC) is None:
            return
        for partition in range(self.store.topic(OFFSETS_TOPIC).partitions):
            yield from self._replay_partition(partition)

    def _replay_partition(self, partition: int) -> Iterator[Replayed]:
        offset = self.store.log_start_offset(OFFSETS_TOPIC, partition)
        end = self.store.log_end_offset(OFFSETS_TOPIC, partition)
        while offset < end:
            read = self.store.read(OFFSETS_TOPIC, partition, offset, READ_CHUNK)
            if read.status is not StoreStatus.OK or read.next_offset <= offset:
                log.error("replaying %s-%d stopped at offset %d: %s", OFFSETS_TOPIC, partition,
                          offset, read.status)
                return
            for buffer in read.buffers:
                for header in iter_batch_headers(buffer):
                    yield from self._replay_batch(partition, offset, header, buffer)
            offset = read.next_offset

    def _replay_batch(self, partition: int, start: int, header: BatchHeader,
                      buffer: memoryview) -> list[Replayed]:
        """The records of the batch of ``header`` in ``buffer`` at or above ``start`` (a read
        may begin inside a batch)."""
        batch = buffer if header.size == len(buffer) else \
            buffer[header.position:header.position + header.size]
        if header.is_control:
            kind = control_type(batch)
            return [] if kind is None or header.base_offset < start else \
                [Replayed(partition, header.base_offset, header.producer_id, None, None, kind)]
        producer_id = header.producer_id if header.is_transactional else -1
        replayed = [Replayed(partition, r.offset, producer_id, r.key, r.value)
                    for r in decode_records(batch) if r.offset >= start and r.key is not None]
        self.replayed += len(replayed)
        return replayed
