"""The `commitgate` Spark data source: Spark's Kafka source and sink over CommitGate topics.

    from commitgate.pipeline.source import register
    register(spark)
    spark.read.format("commitgate").option("kafka.bootstrap.servers", ...).option(...).load()

Batch and streaming reads and writes (see docs/pipeline.md).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from commitgate.pipeline.exactly_once import TaskIdentity
from commitgate.pipeline.kafka_read import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    partition_state,
    plan_ranges,
    rate_limit,
    read_range,
    stream_initial,
    stream_ranges,
)
from commitgate.pipeline.kafka_write import (
    TaskResult,
    check_broker,
    check_schema,
    write_batches,
    write_exactly_once,
)
from commitgate.pipeline.options import ReadOptions, WriteOptions, parse_read, parse_write

log = logging.getLogger(__name__)

KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"


class CommitGateDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "commitgate"

    def schema(self) -> str:
        headers = parse_read(self.options).include_headers
        return f"{KAFKA_SCHEMA}, {HEADERS_FIELD}" if headers else KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return CommitGateReader(parse_read(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CommitGateStreamReader(parse_read(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> CommitGateStreamWriter:
        options = parse_write(self.options, streaming=True)
        check_schema(schema, options, overwrite=False)  # complete mode appends too, as Spark's
        check_broker(options)
        return CommitGateStreamWriter(options)

    def writer(self, schema: StructType, overwrite: bool) -> CommitGateWriter:
        options = parse_write(self.options)
        check_schema(schema, options, overwrite)
        check_broker(options)
        return CommitGateWriter(options)


@dataclass
class RangePartition(InputPartition):
    offsets: OffsetRange


def read_partition(options: ReadOptions, partition: InputPartition,
                   schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    # with no ranges to read, Spark still runs one placeholder InputPartition(None)
    if not isinstance(partition, RangePartition):
        return iter(())
    return read_range(options, partition.offsets, schema)


class CommitGateReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        # the exact Arrow schema Spark expects back from read() (timestamps in UTC)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(r) for r in plan_ranges(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition, self.arrow_schema)


class CommitGateStreamReader(DataSourceStreamReader):
    """Micro-batches by offset range; the offsets live in Spark's checkpoint, not in a group."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def initialOffset(self) -> dict:
        return offsets_to_json(stream_initial(self.options))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        state = partition_state(self.options)
        if isinstance(limit, ReadMaxRows):
            return offsets_to_json(rate_limit(state, offsets_from_json(start), limit.max_rows))
        return offsets_to_json(state.latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = stream_ranges(self.options, offsets_from_json(start), offsets_from_json(end))
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition, self.arrow_schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: the broker keeps no state for this reader."""


@dataclass
class CommitMessage(WriterCommitMessage):
    result: TaskResult


class _ProducerTasks:
    """The executor side of both writers: each Spark task produces its rows with one producer."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommitMessage:
        if self.options.exactly_once:
            task = TaskIdentity.current()
            return CommitMessage(write_exactly_once(self.options, iterator, task))
        return CommitMessage(write_batches(self.options, iterator))


class CommitGateWriter(_ProducerTasks, DataSourceArrowWriter):
    """A batch write: at least once, as Spark's Kafka sink."""

    def commit(self, messages: list[CommitMessage | None]) -> None:
        total = sum(m.result.records for m in messages if m is not None)
        log.info("commitgate sink: %d records written to %s", total, self.options.bootstrap)

    def abort(self, messages: list[CommitMessage | None]) -> None:
        # records acknowledged before the failure stay in the topics, as with Spark's Kafka sink
        written = sum(m.result.records for m in messages if m is not None)
        log.warning("commitgate sink: job aborted; %d records of finished tasks remain written",
                    written)


class CommitGateStreamWriter(_ProducerTasks, DataSourceStreamArrowWriter):
    """Micro-batches exactly once by default (attempt markers, pipeline/exactly_once.py), or at
    least once as Spark's Kafka sink (deliveryGuarantee=at-least-once)."""

    def commit(self, messages: list[CommitMessage | None], batchId: int) -> None:
        results = [m.result for m in messages if m is not None]
        log.info("commitgate sink: micro-batch %d wrote %d records (%d written before)", batchId,
                 sum(r.records for r in results), sum(r.skipped for r in results))

    def abort(self, messages: list[CommitMessage | None], batchId: int) -> None:
        written = sum(m.result.records for m in messages if m is not None)
        again = ("are not written again when the batch is retried" if self.options.exactly_once
                 else "are written again when the batch is retried")
        log.warning("commitgate sink: micro-batch %d aborted; %d records of finished tasks "
                    "remain written and %s", batchId, written, again)


def register(spark: SparkSession) -> None:
    spark.dataSource.register(CommitGateDataSource)
