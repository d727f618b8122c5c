"""Writes like Spark's Kafka sink: one idempotent acks=all producer per Spark task; streaming
tasks exactly once (pipeline/exactly_once.py)."""
from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from kafka import KafkaProducer
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from commitgate.pipeline.clients import open_client
from commitgate.pipeline.exactly_once import (
    ATTEMPT_HEADER,
    BEGIN,
    DONE,
    Marker,
    MarkerLog,
    ReplayCheck,
    TaskIdentity,
    earlier_output,
    marker_topic,
    topic_ends,
)
from commitgate.pipeline.options import OptionError, WriteOptions

log = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
# columns Spark's Kafka sink reads, with the types it accepts; other columns are ignored
_ACCEPTED = {"key": (StringType, BinaryType), "value": (StringType, BinaryType),
             "topic": (StringType,), "partition": (IntegerType,)}


@dataclass(frozen=True)
class TaskResult:
    """A task's commit message: rows its producer had acknowledged, and rows it did not send
    again because an earlier attempt of the same micro-batch task had written them."""
    records: int
    skipped: int = 0


def check_schema(schema: StructType, options: WriteOptions, overwrite: bool) -> None:
    if overwrite:
        raise OptionError("save mode Overwrite is not allowed for the commitgate sink; allowed "
                          "save modes are Append and ErrorIfExists (default)")
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("required attribute 'value' not found in the DataFrame's columns")
    if options.topic is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present; use the "
                          "'topic' option for setting a topic")
    for name, types in _ACCEPTED.items():
        if name in fields and not isinstance(fields[name], types):
            wanted = " or ".join(t.typeName() for t in types)
            raise OptionError(f"{name} attribute type must be a {wanted}, got "
                              f"{fields[name].simpleString()}")
    # any nullability is accepted, as by Spark's sink (simpleString leaves it out)
    if "headers" in fields and fields["headers"].simpleString() != HEADERS_TYPE.simpleString():
        raise OptionError(f"headers attribute type must be {HEADERS_TYPE.simpleString()}, got "
                          f"{fields['headers'].simpleString()}")


def open_producer(options: WriteOptions) -> KafkaProducer:
    # Spark's sink lets kafka.acks etc. override its defaults; ours are the safe ones
    settings = {"acks": "all", "enable_idempotence": True, "linger_ms": 5,
                "batch_size": 256 << 10, **options.client}
    return open_client(KafkaProducer, options.bootstrap, settings)


def check_broker(options: WriteOptions) -> None:
    """Fail on the driver, before any task writes, when the broker cannot be reached."""
    open_producer(options).close()


def write_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> TaskResult:
    """A task of a batch write, or of an at-least-once streaming write."""
    producer = open_producer(options)
    with _closing(producer):
        sender = _Sender(producer, options)
        sender.send_all(batches)
    return TaskResult(records=sender.sent)


def write_exactly_once(options: WriteOptions, batches: Iterator[pa.RecordBatch],
                       task: TaskIdentity) -> TaskResult:
    """A task of an exactly-once streaming write (the scheme: pipeline/exactly_once.py)."""
    producer = open_producer(options)
    with _closing(producer):
        markers = MarkerLog(options, marker_topic(options, task), producer)
        markers.ensure_topic()
        mine = [m for m in markers.of_batch(task.batch_id) if m.task == task.partition]
        done = next((m for m in mine if m.phase == DONE), None)
        if done is not None:
            for _ in batches:  # Spark still streams the task's rows to us
                pass
            log.info("commitgate sink: micro-batch %d task %d was written before (%d rows)",
                     task.batch_id, task.partition, done.records)
            return TaskResult(records=0, skipped=done.records)
        replay = earlier_output(options, [m for m in mine if m.phase == BEGIN])
        token = secrets.token_hex(8)

        def begin(topic: str) -> None:
            ends = topic_ends(options, topic)
            markers.append(Marker(task.batch_id, task.partition, BEGIN, token, topic, ends))

        sender = _Sender(producer, options, replay, begin, (ATTEMPT_HEADER, bytes.fromhex(token)))
        sender.send_all(batches)
        markers.append(Marker(task.batch_id, task.partition, DONE, token,
                              records=sender.sent + replay.skipped))
    return TaskResult(records=sender.sent, skipped=replay.skipped)


@contextmanager
def _closing(producer: KafkaProducer) -> Iterator[None]:
    """Close after the block; after a failure without sending what is still buffered, so a
    failed attempt stops writing as soon as it can."""
    try:
        yield
    except BaseException:
        producer.close(timeout=0)
        raise
    producer.close()


class _Sender:
    """Rows of Arrow batches to producer sends, like Spark's Kafka sink; with a replay check,
    rows an earlier attempt wrote are left out; `begin` runs before a topic's first send."""

    def __init__(self, producer: KafkaProducer, options: WriteOptions,
                 replay: ReplayCheck | None = None, begin: Callable[[str], None] | None = None,
                 extra_header: tuple[str, bytes] | None = None) -> None:
        self.producer, self.options, self.replay = producer, options, replay
        self.begin, self.extra = begin, [extra_header] if extra_header else []
        self.begun: set[str] = set()
        self.errors: list[Exception] = []
        self.sent = 0

    def send_all(self, batches: Iterator[pa.RecordBatch]) -> None:
        rows = 0
        for batch in batches:
            self._send_batch(batch)
            rows += batch.num_rows
            if self.errors:
                break
        self.producer.flush()
        if self.errors:
            raise RuntimeError(f"commitgate sink: producing to {self.options.bootstrap} failed "
                               f"after {rows} rows were sent: {self.errors[0]}") from self.errors[0]

    def _send_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names
                   if name in ("key", "value", "topic", "partition", "headers")}
        values = [_to_bytes(v) for v in columns["value"]]
        keys = [_to_bytes(k) for k in columns.get("key", [None] * n)]
        topics = [self.options.topic] * n if self.options.topic else columns["topic"]
        partitions = columns.get("partition", [None] * n)
        headers = columns.get("headers", [None] * n)
        replay = self.replay if self.replay is not None and self.replay.active else None
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise ValueError("null topic present in the data; use the 'topic' option for "
                                 "setting a default topic")
            user = [(h["key"], h["value"]) for h in headers[i] or ()]
            if replay and replay.already_written((topic, keys[i], values[i], tuple(user))):
                continue
            if self.begin is not None and topic not in self.begun:
                self.begin(topic)
                self.begun.add(topic)
            future = self.producer.send(topic, value=values[i], key=keys[i],
                                        partition=partitions[i], headers=user + self.extra)
            future.add_errback(self.errors.append)
            self.sent += 1
def _to_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
