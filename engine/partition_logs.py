"""PartitionLogs: each topic-partition's log as readers and the lifecycle services see it.

A partition's log is its ConsumeQueue over the shared CommitLog, from its log start offset (the
topic table's, bounded by the units the queue still holds) to its end. Here are the walks over
its batches that the read path, the CommitLog cleaner, the log compactor, retention and the
partition sizes share, and the one place a log start moves.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from commitgate.engine.commit_log import COUNT_AND_BASE, CommitLog
from commitgate.engine.consume_queue import ConsumeQueue, UnitReader
from commitgate.engine.consume_queue_store import ConsumeQueueStore
from commitgate.engine.segment_ledger import StartMove
from commitgate.engine.status import StoreStatus
from commitgate.engine.topic_table import TopicTable


class PartitionLogs:
    def __init__(self, commit_log: CommitLog, queues: ConsumeQueueStore, table: TopicTable
                 ) -> None:
        self.commit_log = commit_log
        self.queues = queues
        self.table = table
        # called with (topic, partition, new log start) after a log start moved
        self.start_listeners: list[Callable[[str, int, int], None]] = []

    def queue(self, topic: str, partition: int) -> tuple[ConsumeQueue | None, StoreStatus]:
        """The partition's ConsumeQueue, or None and UNKNOWN_TOPIC_OR_PARTITION."""
        record = self.table.topics.get(topic)
        if record is None or not 0 <= partition < record.partitions:
            return None, StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
        return self.queues.get(topic, partition), StoreStatus.OK

    # ---- log starts ---------------------------------------------------------------------------

    def logical_start(self, topic: str, partition: int) -> int:
        """The topic table's log start (0 for an unknown topic), whatever the queue holds."""
        record = self.table.topics.get(topic)
        return 0 if record is None else record.log_start_offsets.get(partition, 0)

    def log_start(self, queue: ConsumeQueue) -> int:
        """The first offset readers see: the table's log start within the queue's units."""
        logical = self.table.topics[queue.topic].log_start_offsets.get(queue.partition, 0)
        return min(max(logical, queue.min_offset), queue.max_offset)

    def log_start_offset(self, topic: str, partition: int) -> int:
        """``log_start`` of a partition, or -1 when unknown."""
        queue, _ = self.queue(topic, partition)
        return -1 if queue is None else self.log_start(queue)

    def advance_log_start(self, topic: str, partition: int, offset: int) -> None:
        """Move the logical log start forward (never back); the caller saves the table. The
        CommitLog cleaner counts what died and deletes the queue files wholly below later,
        a slice at a time (a big move would hold the loop)."""
        record = self.table.topics[topic]
        starts = record.log_start_offsets
        if offset > starts.get(partition, 0):
            old = self.log_start_offset(topic, partition)
            starts[partition] = offset
            self.commit_log.ledger.moves.append(StartMove(topic, partition, old, offset, record))
            start = self.log_start_offset(topic, partition)
            for listener in self.start_listeners:
                listener(topic, partition, start)

    # ---- batches ------------------------------------------------------------------------------

    def entries(self, queue: ConsumeQueue, offset: int) -> Iterator[tuple[memoryview, int]]:
        """The CommitLog entries of a partition's batches from the one holding ``offset`` on,
        each with the offset after its batch."""
        end = queue.max_offset
        units = UnitReader(queue)
        while offset < end:
            phy, size, _ = units.get(offset)
            entry = self.commit_log.entry(phy, size) if size else None
            if entry is None:
                return
            count, base = COUNT_AND_BASE.unpack_from(entry, 16)
            offset = max(base + count, offset + 1)
            yield entry, offset

    def batch_entries(self, queue: ConsumeQueue, offset: int, end: int
                      ) -> Iterator[tuple[memoryview, int]]:
        """``entries`` of the batches that begin below ``end`` (the lifecycle services' walk)."""
        for entry, after in self.entries(queue, offset):
            yield entry, after
            if after >= end:
                return

    def batch_base(self, queue: ConsumeQueue, offset: int) -> int:
        """The base offset of the batch holding ``offset``."""
        phy, size, _ = queue.get(offset)
        entry = self.commit_log.entry(phy, size)
        return offset if entry is None else COUNT_AND_BASE.unpack_from(entry, 16)[1]

    def bytes_between(self, queue: ConsumeQueue, lo: int, hi: int) -> int:
        """CommitLog bytes of the batches that begin in [lo, hi): one step per batch."""
        return sum(len(entry) for entry, _ in self.batch_entries(queue, lo, hi)) if lo < hi \
            else 0

    def stored_batches(self, from_phy: int
                       ) -> Iterator[tuple[str, int, int, memoryview, int]] | None:
        """Stored batches of existing topics from CommitLog offset ``from_phy`` on (or from the
        oldest segment kept), as (topic, partition, base offset, body, entry end). Copies the
        cleaner or the compactor made come too, after newer batches of their partition (their
        originals may be gone): the caller keeps a batch only above the last it has. None when
        ``from_phy`` lies past the CommitLog end: recovery cut off a tail the caller had seen."""
        commit_log = self.commit_log
        if from_phy > commit_log.max_offset:
            return None

        def stored() -> Iterator[tuple[str, int, int, memoryview, int]]:
            for req in commit_log.iter_entries(max(from_phy, commit_log.min_offset),
                                               check_crc=False):
                topic = self.table.topics.get(req.topic)
                if topic is None or req.partition >= topic.partitions or \
                        req.phy_offset < topic.created_phy:
                    continue  # a deleted topic, or an earlier topic of the same name
                yield (req.topic, req.partition, req.queue_offset,
                       commit_log.body(req.phy_offset, req.size), req.phy_offset + req.size)
        return stored()
