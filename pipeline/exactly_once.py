"""Exactly-once micro-batch output without transactions: attempt markers and a replay check.

Spark replays a micro-batch whose output was written but not recorded in its commit log (the
driver died in between, or a task was retried). The replay has the same batch id and, for a
deterministic query, the same rows in the same task partitions. Each task of a streaming write
therefore keeps, in a marker topic of its query (one partition, written with acks=all):

- a ``begin`` marker per output topic, written and acknowledged before the task's first record
  to that topic: the attempt's random token and the topic's end offsets at that moment;
- a ``done`` marker after its producer flushed every record.

Every record the task sends carries the attempt's token in the header ``commitgate.sink.attempt``.
A task that finds its ``done`` marker writes nothing. A task that finds only ``begin`` markers
(an earlier attempt died part way) reads each named topic from the recorded offsets, counts the
records carrying an earlier attempt's token by content, and sends only the rows not yet there.
Markers of older batches are obsolete once a later batch runs (Spark starts batch B only after
batch B-1 is in its commit log), so the task deletes them (DeleteRecords) as it goes.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from commitgate.pipeline.clients import open_client
from commitgate.pipeline.options import WriteOptions

log = logging.getLogger(__name__)

ATTEMPT_HEADER = "commitgate.sink.attempt"
MARKER_TOPIC_PREFIX = "__commitgate_sink-"
BEGIN, DONE = "begin", "done"
SCAN_CHUNK = 1000  # marker offsets read per step when walking the marker topic backwards
READ_TIMEOUT_S = 120.0  # no progress for this long while reading markers or records: fail

# what identifies a record's content for the replay check: topic, key, value, headers
Content = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


@dataclass(frozen=True)
class TaskIdentity:
    """A streaming write task: its query (stable across restarts), micro-batch and partition."""
    query_id: str
    batch_id: int
    partition: int

    @classmethod
    def current(cls) -> TaskIdentity:
        from pyspark import TaskContext

        context = TaskContext.get()
        query = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        if context is None or query is None or batch is None:
            raise RuntimeError("commitgate sink: an exactly-once write runs only as a "
                               "Structured Streaming micro-batch (no query or batch id found)")
        return cls(query, int(batch), context.partitionId())


@dataclass(frozen=True)
class Marker:
    batch: int
    task: int
    phase: str  # BEGIN or DONE
    token: str
    topic: str | None = None  # BEGIN: the output topic it covers
    offsets: dict[int, int] = field(default_factory=dict)  # BEGIN: partition -> end offset
    records: int = 0  # DONE: rows the task's output holds

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Marker:
        fields = json.loads(raw)
        fields["offsets"] = {int(p): o for p, o in fields["offsets"].items()}
        return cls(**fields)


def marker_topic(options: WriteOptions, identity: TaskIdentity) -> str:
    return options.marker_topic or MARKER_TOPIC_PREFIX + identity.query_id


class MarkerLog:
    """The marker topic of one query, read backwards from its end."""

    def __init__(self, options: WriteOptions, topic: str, producer: KafkaProducer) -> None:
        self.options, self.topic, self.producer = options, topic, producer
        self.tp = TopicPartition(topic, 0)

    def ensure_topic(self) -> None:
        admin = open_client(KafkaAdminClient, self.options.bootstrap, self.options.client)
        try:
            # markers are pruned by the sink itself (DeleteRecords), never by retention
            admin.create_topics([NewTopic(self.topic, 1, -1, topic_configs={
                "retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"})])
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def of_batch(self, batch: int) -> list[Marker]:
        """The markers of `batch` (every task, every attempt); deletes older batches' markers."""
        consumer = open_reader(self.options)
        try:
            consumer.assign([self.tp])
            start = consumer.beginning_offsets([self.tp])[self.tp]
            end = consumer.end_offsets([self.tp])[self.tp]
            found, obsolete_end = self._walk_back(consumer, batch, start, end)
        finally:
            consumer.close()
        if obsolete_end > start:
            self._delete_before(obsolete_end)
        return found

    def _walk_back(self, consumer: KafkaConsumer, batch: int, start: int,
                   end: int) -> tuple[list[Marker], int]:
        found: list[Marker] = []
        high = end
        while high > start:
            low = max(start, high - SCAN_CHUNK)
            chunk = [(offset, Marker.decode(value))
                     for offset, value in read_values(consumer, self.tp, low, high)]
            found += [m for _, m in chunk if m.batch == batch]
            older = [offset for offset, m in chunk if m.batch < batch]
            if older:
                return found, max(older) + 1
            high = low
        return found, start

    def _delete_before(self, offset: int) -> None:
        admin = open_client(KafkaAdminClient, self.options.bootstrap, self.options.client)
        try:
            admin.delete_records({self.tp: offset})
        except KafkaError:  # pruning is housekeeping: the next batch's tasks try again
            log.warning("commitgate sink: could not delete markers of %s before offset %d",
                        self.topic, offset, exc_info=True)
        finally:
            admin.close()

    def append(self, marker: Marker) -> None:
        self.producer.send(self.topic, marker.encode(), partition=0).get(
            timeout=READ_TIMEOUT_S)


def open_reader(options: WriteOptions) -> KafkaConsumer:
    return open_client(KafkaConsumer, options.bootstrap,
                       {"enable_auto_commit": False, "group_id": None,
                        "auto_offset_reset": "earliest", **options.client})


def read_values(consumer: KafkaConsumer, tp: TopicPartition, start: int,
                end: int) -> Iterable[tuple[int, bytes]]:
    """(offset, value) of the records of one partition in [start, end)."""
    for record in read_records(consumer, {tp: (start, end)}):
        yield record.offset, record.value


def read_records(consumer: KafkaConsumer, ranges: dict[TopicPartition, tuple[int, int]]):
    """The records of each partition's [start, end); fails after READ_TIMEOUT_S without any."""
    pending = {tp: bounds for tp, bounds in ranges.items() if bounds[0] < bounds[1]}
    consumer.assign(list(pending))
    for tp, (start, _) in pending.items():
        consumer.seek(tp, start)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"commitgate sink: no progress reading {sorted(map(str, pending))}"
                               f" within {READ_TIMEOUT_S:.0f} s")
        for tp, records in consumer.poll(timeout_ms=1000).items():
            deadline = time.monotonic() + READ_TIMEOUT_S
            start, end = pending.get(tp, (0, 0))
            yield from (r for r in records if start <= r.offset < end)
        for tp in [tp for tp, (_, end) in pending.items() if consumer.position(tp) >= end]:
            del pending[tp]


class ReplayCheck:
    """Contents an earlier attempt of this task already wrote: sent rows matching them are
    skipped, once per copy found."""

    def __init__(self, written: Counter[Content]) -> None:
        self.written = written
        self.skipped = 0

    @property
    def active(self) -> bool:
        return bool(self.written)

    def already_written(self, content: Content) -> bool:
        if self.written[content] > 0:
            self.written[content] -= 1
            self.skipped += 1
            return True
        return False


def earlier_output(options: WriteOptions, begins: list[Marker]) -> ReplayCheck:
    """Read back what the attempts behind `begins` wrote, from the offsets they recorded (from
    the start of partitions they did not see: a topic created or grown since)."""
    tokens = {bytes.fromhex(m.token) for m in begins}
    written: Counter[Content] = Counter()
    if not begins:
        return ReplayCheck(written)
    consumer = open_reader(options)
    try:
        ranges: dict[TopicPartition, int] = {}
        for marker in begins:
            for partition in consumer.partitions_for_topic(marker.topic) or ():
                tp = TopicPartition(marker.topic, partition)
                start = marker.offsets.get(partition, 0)
                ranges[tp] = min(start, ranges.get(tp, start))
        ends = consumer.end_offsets(list(ranges))
        starts = consumer.beginning_offsets(list(ranges))
        bounds = {tp: (max(start, starts[tp]), ends[tp]) for tp, start in ranges.items()}
        for record in read_records(consumer, bounds):
            headers = tuple(record.headers or ())
            if any(k == ATTEMPT_HEADER and v in tokens for k, v in headers):
                user = tuple((k, v) for k, v in headers if k != ATTEMPT_HEADER)
                written[(record.topic, record.key, record.value, user)] += 1
    finally:
        consumer.close()
    return ReplayCheck(written)


def topic_ends(options: WriteOptions, topic: str) -> dict[int, int]:
    """The end offset of every partition of `topic` (an unknown topic has none yet)."""
    consumer = open_reader(options)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in partitions]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()
