"""Reads through Kafka clients: offset ranges planned on the driver, read on executors.

For a batch query (`plan_ranges`) or a micro-batch (`stream_ranges`), the driver resolves which
topic-partitions to read and their [start, end) offsets with kafka-python; each range becomes one
Spark input partition (more for `minPartitions`), and the executor that runs it assigns one
librdkafka (confluent-kafka) consumer to that partition at the range's start and yields the
records as Arrow record batches (`read_range`): the records are decoded in C, and Python only
gathers each column into a list for pa.array.
"""
from __future__ import annotations

import bisect
import itertools
import logging
import math
import operator
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer as Reader
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as ReaderPartition
from kafka import KafkaConsumer, TopicPartition

from commitgate.pipeline.clients import open_client, open_reader
from commitgate.pipeline.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    ReadOptions,
    TimeSpec,
    batch_bounds,
    stream_start,
)

log = logging.getLogger(__name__)

ARROW_BATCH_RECORDS = 8192
POLL_SLICE_MS = 1000
TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
# the executors' librdkafka readers: no group membership (assign only) and nothing committed;
# larger fetches than its 1 MiB per partition: one reader reads one partition
# isolation.level: the Java client's default, which Spark's Kafka source and the driver's
# planning (kafka-python) have; librdkafka's own is read_committed, which would stop a read at
# an open transaction short of the planned end (kafka.isolation.level sets both sides)
READER_DEFAULTS = {"group.id": "commitgate-source-executor", "enable.auto.commit": False,
                   "enable.auto.offset.store": False, "max.partition.fetch.bytes": 8 << 20,
                   "isolation.level": "read_uncommitted"}
# what the reading loop relies on: out-of-range offsets reported (failOnDataLoss decides), and
# an event at the partition's end
READER_OWNED = {"auto.offset.reset": "error", "enable.partition.eof": True}


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


class DataLossError(RuntimeError):
    """Records to be read were deleted (retention or DeleteRecords) and failOnDataLoss is true."""


def open_consumer(options: ReadOptions) -> KafkaConsumer:
    settings = {"enable_auto_commit": False, "group_id": None, "auto_offset_reset": "none",
                "allow_auto_create_topics": False, **options.client}
    return open_client(KafkaConsumer, options.bootstrap, settings)


# --- driver: planning ---------------------------------------------------------------------

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class PartitionState:
    """What the driver learns about the partitions read: their log start and latest offsets."""
    partitions: list[TopicPartition]
    log_start: Offsets
    latest: Offsets


def partition_state(options: ReadOptions) -> PartitionState:
    consumer = open_consumer(options)
    try:
        partitions = _topic_partitions(consumer, options)
        return PartitionState(partitions, consumer.beginning_offsets(partitions),
                              consumer.end_offsets(partitions))
    finally:
        consumer.close()


def plan_ranges(options: ReadOptions) -> list[OffsetRange]:
    """The offset ranges of a batch query."""
    starting, ending = batch_bounds(options)
    state = partition_state(options)
    start = resolve(starting, state, "startingOffsets") if options.starting_time is None else \
        by_time(options, state, options.starting_time, "startingOffsetsByTimestamp",
                options.missing_time_latest)
    end = resolve(ending, state, "endingOffsets") if options.ending_time is None else \
        by_time(options, state, options.ending_time, "endingOffsetsByTimestamp", True)
    for tp, offset in end.items():
        if offset > state.latest[tp]:
            raise OptionError(f"option 'endingOffsets': offset {offset} for {tp.topic}-"
                              f"{tp.partition} is beyond its latest offset {state.latest[tp]}")
    return make_ranges(options, start, end, state.log_start)


def make_ranges(options: ReadOptions, start: Offsets, end: Offsets,
                log_start: Offsets) -> list[OffsetRange]:
    ranges = []
    for tp in sorted(end):
        first = _check_data_loss(options, tp, start[tp], log_start[tp])
        if first > end[tp]:
            raise OptionError(f"beginning offset {first} is after the ending offset {end[tp]} "
                              f"for topic {tp.topic} partition {tp.partition}")
        if end[tp] > first:
            ranges.append(OffsetRange(tp.topic, tp.partition, first, end[tp]))
    return split_ranges(ranges, options.min_partitions)


def stream_initial(options: ReadOptions) -> Offsets:
    """Where a streaming query without a checkpoint starts (startingOffsets, default latest)."""
    state = partition_state(options)
    if options.starting_time is not None:
        return by_time(options, state, options.starting_time, "startingOffsetsByTimestamp",
                       options.missing_time_latest)
    return resolve(stream_start(options), state, "startingOffsets")


def stream_ranges(options: ReadOptions, start: Offsets, end: Offsets) -> list[OffsetRange]:
    """A micro-batch's ranges; a partition that appeared since `start` is read from its start."""
    consumer = open_consumer(options)
    try:
        log_start = consumer.beginning_offsets(list(end))
    finally:
        consumer.close()
    return make_ranges(options, {tp: start.get(tp, log_start[tp]) for tp in end}, end, log_start)


def rate_limit(state: PartitionState, start: Offsets, max_records: int) -> Offsets:
    """maxOffsetsPerTrigger as Spark spreads it: in proportion to what each partition has."""
    begin = {tp: start.get(tp, state.log_start[tp]) for tp in state.latest}
    available = {tp: max(state.latest[tp] - begin[tp], 0) for tp in state.latest}
    total = sum(available.values())
    if total <= max_records:
        return dict(state.latest)
    end = {}
    for tp, size in available.items():
        share = max_records * size / total
        end[tp] = begin[tp] + (math.ceil(share) if share < 1 else math.floor(share))
    return end


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark keeps a stream's offsets in its checkpoint as JSON, in Spark's Kafka layout."""
    result: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return result


def offsets_from_json(offsets: dict[str, dict[str, int]]) -> Offsets:
    return {TopicPartition(topic, int(partition)): offset
            for topic, partitions in offsets.items() for partition, offset in partitions.items()}


def _topic_partitions(consumer: KafkaConsumer, options: ReadOptions) -> list[TopicPartition]:
    if options.strategy == "subscribepattern":
        # the Java client's pattern subscription leaves out internal topics
        topics = sorted(t for t in consumer.topics()
                        if re.fullmatch(options.pattern, t) and not t.startswith("__"))
    else:
        topics = list(options.topics) or sorted({topic for topic, _ in options.assigned})
    known: dict[str, set[int]] = {}
    for topic in topics:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise OptionError(f"topic {topic!r} does not exist on {options.bootstrap}")
        known[topic] = partitions
    if options.strategy != "assign":
        return [TopicPartition(t, p) for t in topics for p in sorted(known[t])]
    missing = [f"{t}-{p}" for t, p in options.assigned if p not in known[t]]
    if missing:
        raise OptionError(f"option 'assign': partition(s) {missing} do not exist")
    return [TopicPartition(t, p) for t, p in options.assigned]


def resolve(spec: OffsetSpec, state: PartitionState, name: str) -> Offsets:
    """Offsets per partition from 'earliest', 'latest' or JSON with -2 / -1 in it."""
    if spec == "earliest":
        return dict(state.log_start)
    if spec == "latest":
        return dict(state.latest)
    wanted = {(tp.topic, tp.partition) for tp in state.partitions}
    if set(spec) != wanted:
        # Spark asks for every partition read, so a typo cannot silently read everything
        raise OptionError(f"option '{name}' must give an offset for every topic-partition read: "
                          f"missing {sorted(wanted - set(spec))}, unknown "
                          f"{sorted(set(spec) - wanted)}")
    sentinels = {EARLIEST: state.log_start, LATEST: state.latest}
    return {tp: sentinels[spec[tp]][tp] if spec[tp] in sentinels else spec[tp]
            for tp in state.partitions}


def by_time(options: ReadOptions, state: PartitionState, spec: TimeSpec, name: str,
            missing_latest: bool) -> Offsets:
    """The first offset of each partition whose record time is at or after the given time."""
    times = {tp: spec for tp in state.partitions} if isinstance(spec, int) else spec
    if set(times) != set(state.partitions):
        raise OptionError(f"option '{name}' must give a timestamp for every topic-partition "
                          f"read: missing {sorted(set(state.partitions) - set(times))}, "
                          f"unknown {sorted(set(times) - set(state.partitions))}")
    consumer = open_consumer(options)
    try:
        found = consumer.offsets_for_times({TopicPartition(*tp): t for tp, t in times.items()})
    finally:
        consumer.close()
    offsets = {}
    for tp in state.partitions:
        if found.get(tp) is not None:
            offsets[tp] = found[tp].offset
        elif missing_latest:
            offsets[tp] = state.latest[tp]
        else:
            raise OptionError(f"{name}: {tp.topic}-{tp.partition} has no record at or after "
                              f"timestamp {times[tp]} (set 'startingOffsetsByTimestampStrategy' "
                              f"to 'latest' to start at its latest offset)")
    return offsets


def _check_data_loss(options: ReadOptions, tp: TopicPartition, start: int,
                     log_start: int) -> int:
    """Where reading may begin when `start` lies below the partition's log start offset."""
    if start >= log_start:
        return start
    message = (f"records of {tp.topic}-{tp.partition} from offset {start} to {log_start - 1} "
               f"are no longer available (log start offset {log_start}): deleted by retention or "
               f"DeleteRecords")
    if options.fail_on_data_loss:
        raise DataLossError(message + ". Set option 'failOnDataLoss' to 'false' to read from "
                            "the log start instead.")
    log.warning("%s; failOnDataLoss is false, reading from offset %d", message, log_start)
    return log_start


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges in proportion to their size so there are about `min_partitions` in all."""
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    result = []
    for r in ranges:
        parts = min(max(round(r.size / total * min_partitions), 1), r.size)
        bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
        result += [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]
    return result


# --- executor: reading --------------------------------------------------------------------

def read_range(options: ReadOptions, offsets: OffsetRange,
               schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    reader = open_reader({**READER_DEFAULTS, **options.reader, **READER_OWNED, "logger": log})
    try:
        reader.assign([ReaderPartition(offsets.topic, offsets.partition, offsets.start)])
        builder = _BatchBuilder(schema, offsets.topic, offsets.partition, options.include_headers)
        for messages in _fetch(reader, options, offsets):
            builder.add(messages)
            if builder.count >= ARROW_BATCH_RECORDS:
                yield builder.flush()
        if builder.count:
            yield builder.flush()
    finally:
        reader.close()


def _fetch(reader: Reader, options: ReadOptions, offsets: OffsetRange) -> Iterator[list[Message]]:
    """Lists of the records of [start, end); fails if no progress is made for pollTimeoutMs."""
    position = offsets.start  # the next offset wanted
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    while position < offsets.end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no records of {offsets.topic}-{offsets.partition} at offset "
                               f"{position} within kafkaConsumer.pollTimeoutMs="
                               f"{options.poll_timeout_ms} (reading {offsets.describe()})")
        messages = reader.consume(ARROW_BATCH_RECORDS, POLL_SLICE_MS / 1000)
        events = [m for m in messages if m.error() is not None]  # rare: checked per batch
        if events:
            messages = [m for m in messages if m.error() is None]
            position = _handle_events(reader, options, offsets, position, events)
        if messages:
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
            if messages[-1].offset() >= offsets.end:  # fetched past the range's end
                messages = messages[:bisect.bisect_left(messages, offsets.end, key=Message.offset)]
        if messages:
            position = messages[-1].offset() + 1
            yield messages


def _handle_events(reader: Reader, options: ReadOptions, offsets: OffsetRange, position: int,
                   events: list[Message]) -> int:
    """The position after librdkafka's events: end of partition, offset out of range, errors."""
    for event in events:
        error = event.error()
        if error.code() == KafkaError._PARTITION_EOF:
            # what lies between the last record and the end is not records (transaction
            # markers, compacted away): the range is done once the end is reached
            position = max(position, event.offset())
        elif error.code() == KafkaError._AUTO_OFFSET_RESET:
            # deleted while we read (or before): the same rule as at planning time
            position = _check_data_loss(options, TopicPartition(offsets.topic, offsets.partition),
                                        position, _log_start(reader, options, offsets, position))
            # librdkafka stopped the partition's fetcher (a seek fails): assign it afresh
            reader.assign([ReaderPartition(offsets.topic, offsets.partition, position)])
        elif error.fatal():
            raise RuntimeError(f"reading {offsets.describe()} at offset {position}: "
                               f"{error.str()}")
        else:  # librdkafka retries (broker down, leader moved): pollTimeoutMs bounds the wait
            log.warning("reading %s at offset %d: %s", offsets.describe(), position, error.str())
    return position


def _log_start(reader: Reader, options: ReadOptions, offsets: OffsetRange, position: int) -> int:
    try:
        low, _ = reader.get_watermark_offsets(ReaderPartition(offsets.topic, offsets.partition),
                                              timeout=options.poll_timeout_ms / 1000)
    except KafkaException as exc:  # the broker went away meanwhile
        raise RuntimeError(f"reading {offsets.describe()}: offset {position} is out of range "
                           f"and its log start offset is unknown: {exc.args[0].str()}") from None
    return low


class _BatchBuilder:
    """Column lists for one Arrow record batch of a single topic-partition."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int, headers: bool) -> None:
        self.schema, self.headers = schema, headers
        self.topic = pa.scalar(topic, pa.string())
        self.partition = pa.scalar(partition, pa.int32())
        self.messages: list[Message] = []

    @property
    def count(self) -> int:
        return len(self.messages)

    def add(self, messages: list[Message]) -> None:
        self.messages += messages

    def flush(self) -> pa.RecordBatch:
        messages, self.messages = self.messages, []
        n = len(messages)
        stamps = [m.timestamp() for m in messages]  # (type, ms) pairs
        columns = [pa.array([m.key() for m in messages], pa.binary()),
                   pa.array([m.value() for m in messages], pa.binary()),
                   pa.repeat(self.topic, n), pa.repeat(self.partition, n),
                   pa.array([m.offset() for m in messages], pa.int64()),
                   pa.array(list(map(_SECOND, stamps)), TIMESTAMP_MS)
                   .cast(self.schema.field(5).type),
                   # librdkafka's timestamp types are Kafka's plus one (0: not available)
                   pc.subtract(pa.array(list(map(_FIRST, stamps)), pa.int32()), 1)]
        if self.headers:
            columns.append(pa.array([m.headers() or [] for m in messages],
                                    self.schema.field(7).type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)
