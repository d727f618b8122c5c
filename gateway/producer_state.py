"""Idempotent-producer state per (producer id, topic-partition), as Kafka's ProducerStateManager.

For each producer and partition the broker keeps the producer's epoch and the last five
batches it appended (first/last sequence, base offset). A produced batch is then:
- a duplicate of one of those five: answered with its original base offset, not stored again;
- from an older epoch: INVALID_PRODUCER_EPOCH;
- not the next sequence: OUT_OF_ORDER_SEQUENCE_NUMBER;
- otherwise appended, and remembered.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.record_batch import NO_SEQUENCE, BatchHeader

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
CACHED_BATCHES = 5
MAX_SEQUENCE = 0x7FFFFFFF


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    offset_count: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_PRODUCER_EPOCH
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


@dataclass(slots=True)
class Verdict:
    error: ErrorCode = ErrorCode.NONE
    duplicate_of: int = -1  # base offset of the original when the batch is a retry
    message: str | None = None


ACCEPT = Verdict()


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerStateManager:
    def __init__(self) -> None:
        self.entries: dict[tuple[int, str, int], ProducerEntry] = {}

    def check(self, topic: str, partition: int, batch: BatchHeader) -> Verdict:
        """Whether ``batch`` may be appended (before the append, no state change)."""
        if batch.producer_id == NO_PRODUCER_ID:
            return ACCEPT
        entry = self.entries.get((batch.producer_id, topic, partition))
        if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
            return ACCEPT  # unknown producer (new, or its state was removed): any sequence
        if batch.producer_epoch < entry.epoch:
            return Verdict(ErrorCode.INVALID_PRODUCER_EPOCH, message=(
                f"epoch {batch.producer_epoch} of producer {batch.producer_id} is older than "
                f"the current {entry.epoch} on {topic}-{partition}"))
        if batch.producer_epoch > entry.epoch:
            if batch.base_sequence != 0:
                return Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
                    f"producer {batch.producer_id} starts epoch {batch.producer_epoch} on "
                    f"{topic}-{partition} at sequence {batch.base_sequence}, expected 0"))
            return ACCEPT
        for cached in entry.batches:
            if cached.first_seq == batch.base_sequence and cached.last_seq == batch.last_sequence:
                return Verdict(duplicate_of=cached.base_offset)
        if not _in_sequence(entry.last_seq, batch.base_sequence):
            return Verdict(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
                f"producer {batch.producer_id} sent sequence {batch.base_sequence} to "
                f"{topic}-{partition}, expected {entry.last_seq + 1}"))
        return ACCEPT

    def record(self, topic: str, partition: int, batch: BatchHeader, base_offset: int) -> None:
        """Remember an appended batch (live, or replayed from the CommitLog at start)."""
        if batch.producer_id == NO_PRODUCER_ID:
            return
        key = (batch.producer_id, topic, partition)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = ProducerEntry()
        if batch.producer_epoch != entry.epoch:
            entry.epoch = batch.producer_epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, base_offset,
                                           batch.offset_count))
