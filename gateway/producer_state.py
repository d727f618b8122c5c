"""Idempotent-producer state per (producer id, topic-partition), as Kafka's ProducerStateManager.

For each producer and partition the broker keeps the producer's epoch and the last five
batches it appended (sequence range, offsets, timestamp). A produced batch is then:
- a duplicate of one of those five (same epoch): answered with its original offset, not stored;
- from an older epoch: INVALID_PRODUCER_EPOCH;
- of a newer epoch: accepted from sequence 0 only (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise);
- of the current epoch: accepted when it follows the last sequence (wrapping after 2^31-1),
  OUT_OF_ORDER_SEQUENCE_NUMBER on a gap;
- from a producer without state here (new, expired, or its state never reached this broker):
  accepted at any sequence, as Kafka does since KIP-360.

Like Kafka, the epoch is per producer and partition: an idempotent producer without a
transactional id bumps its epoch on its own and each partition learns it from the batches.
State is keyed by topic id, so a deleted topic's state never reaches a recreated namesake.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field

from commitgate.gateway.partition_txns import PartitionTransactions
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import BatchHeader

NO_PRODUCER_EPOCH = -1
CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
MAX_SEQUENCE = 0x7FFFFFFF

Key = tuple[int, str, int]  # producer id, topic id, partition


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    offset_count: int
    timestamp: int  # the stored batch's max timestamp (Kafka answers duplicates with it)
    phy_end: int  # CommitLog end of its entry: a duplicate with acks=-1 waits until it is durable


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_PRODUCER_EPOCH
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp


@dataclass(slots=True)
class Verdict:
    error: ErrorCode = ErrorCode.NONE
    duplicate: BatchMetadata | None = None  # the original when the batch is a retry
    message: str | None = None


ACCEPT = Verdict()


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def _refuse(code: ErrorCode, message: str) -> Verdict:
    return Verdict(code, message=message)


class ProducerStateManager:
    def __init__(self) -> None:
        self.entries: dict[Key, ProducerEntry] = {}
        self.covered = 0  # CommitLog end up to which every append is reflected here
        self.dirty = False  # changed since the last snapshot
        self.txns = PartitionTransactions()  # open and aborted transactions per partition

    def check(self, topic_id: str, partition: int, batch: BatchHeader) -> Verdict:
        """Whether ``batch`` may be appended (before the append, no state change)."""
        pid = batch.producer_id
        if pid < 0:  # Kafka's hasProducerId(): any negative id means "not idempotent"
            return ACCEPT
        if batch.base_sequence < 0:
            return _refuse(ErrorCode.INVALID_RECORD, f"invalid sequence number "
                           f"{batch.base_sequence} in a batch of producer {pid}")
        entry = self.entries.get((pid, topic_id, partition))
        if entry is not None and batch.producer_epoch < entry.epoch:
            return _refuse(ErrorCode.INVALID_PRODUCER_EPOCH, f"epoch {batch.producer_epoch} of "
                           f"producer {pid} is older than the last seen epoch {entry.epoch}")
        if entry is None or not entry.batches:  # new here, or only markers seen since its epoch
            return ACCEPT
        if batch.producer_epoch > entry.epoch:
            if batch.base_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return _refuse(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {pid} starts "
                               f"epoch {batch.producer_epoch} at sequence {batch.base_sequence}, "
                               f"expected 0")
            return ACCEPT
        return self._check_sequence(entry, batch)

    @staticmethod
    def _check_sequence(entry: ProducerEntry, batch: BatchHeader) -> Verdict:
        first, last = batch.base_sequence, batch.last_sequence
        for cached in entry.batches:
            if cached.first_seq == first and cached.last_seq == last:
                return Verdict(duplicate=cached)
        if entry.epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq, first):
            return _refuse(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer "
                           f"{batch.producer_id} sent sequence {first}, expected "
                           f"{(entry.last_seq + 1) & MAX_SEQUENCE}")
        return ACCEPT

    def record(self, topic_id: str, partition: int, batch: BatchHeader, base_offset: int,
               timestamp: int, phy_end: int, control: int | None = None) -> None:
        """Note an appended batch (live, or replayed from the CommitLog at start); every
        append comes here so that ``covered`` tells snapshots where the CommitLog stood.
        ``control``: the marker kind of a control batch (protocol.record_batch.control_type)."""
        self.covered = phy_end
        if batch.producer_id < 0:
            return
        key = (batch.producer_id, topic_id, partition)
        entry = self.entries.get(key)
        if batch.is_control:
            self._record_marker(key, entry, batch, base_offset, control)
            return
        if batch.is_transactional:
            self.txns.on_batch((topic_id, partition), batch.producer_id, base_offset)
        if entry is None:
            entry = self.entries[key] = ProducerEntry()
        elif entry.batches and base_offset <= entry.batches[-1].base_offset:
            self._replay_older(entry, batch, base_offset, timestamp, phy_end)
            return
        if batch.producer_epoch != entry.epoch:
            entry.epoch = batch.producer_epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence, base_offset,
                                           batch.offset_count, timestamp, phy_end))
        self.dirty = True

    def _record_marker(self, key: Key, entry: ProducerEntry | None, batch: BatchHeader,
                       base_offset: int, control: int | None) -> None:
        """A transaction marker closes the producer's transaction in the partition; it has no
        sequence, but a newer epoch in it (a coordinator's fencing abort) fences older ones."""
        pid, topic_id, partition = key
        if control is not None:
            self.txns.on_marker((topic_id, partition), pid, base_offset, control)
        if entry is None:
            entry = self.entries[key] = ProducerEntry()
        if batch.producer_epoch > entry.epoch:
            entry.epoch = batch.producer_epoch
            entry.batches.clear()
        self.dirty = True

    def _replay_older(self, entry: ProducerEntry, batch: BatchHeader, base_offset: int,
                      timestamp: int, phy_end: int) -> None:
        """Replay met a batch below the last it has: a copy the CommitLog cleaner or the
        compactor made (copies lie after newer batches; a rewritten batch keeps its producer
        fields), maybe all that is left of it. One of the same epoch not seen yet takes its
        place among the last batches, in offset order; the rest is ignored (an older epoch
        must not fence the current one)."""
        if batch.producer_epoch != entry.epoch or \
                any(known.base_offset == base_offset for known in entry.batches):
            return
        kept = sorted([*entry.batches, BatchMetadata(
            batch.base_sequence, batch.last_sequence, base_offset, batch.offset_count,
            timestamp, phy_end)], key=lambda known: known.base_offset)
        entry.batches.clear()
        entry.batches.extend(kept[-CACHED_BATCHES:])
        self.dirty = True

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is ``expiration_ms`` old (Kafka's
        producer.id.expiration.ms, judged by the batch's max timestamp as Kafka does)."""
        # an entry holding only a marker's epoch has nothing to recognise retries by; one with
        # a transaction still open in its partition stays until the coordinator ends it (Kafka)
        old = [key for key, entry in self.entries.items()
               if (not entry.batches or now_ms - entry.last_timestamp >= expiration_ms)
               and not self.txns.is_open((key[1], key[2]), key[0])]
        return self._drop(old)

    def retain_topics(self, topic_ids: Iterable[str]) -> int:
        """Forget the state of topics that no longer exist."""
        live = set(topic_ids)
        self.txns.retain(live)
        return self._drop([key for key in self.entries if key[1] not in live])

    def _drop(self, keys: list[Key]) -> int:
        for key in keys:
            del self.entries[key]
        self.dirty = self.dirty or bool(keys)
        return len(keys)
