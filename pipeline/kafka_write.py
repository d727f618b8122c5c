"""Batch writes like Spark's Kafka sink: one idempotent acks=all producer per Spark task."""
from __future__ import annotations

from collections.abc import Iterator
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

from pipeline.clients import open_client
from pipeline.options import OptionError, WriteOptions

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
# columns Spark's Kafka sink reads, with the types it accepts; other columns are ignored
_ACCEPTED = {"key": (StringType, BinaryType), "value": (StringType, BinaryType),
             "topic": (StringType,), "partition": (IntegerType,)}


@dataclass(frozen=True)
class TaskResult:
    """A task's commit message: what its producer had acknowledged."""
    records: int


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


def write_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> TaskResult:
    # Spark's sink lets kafka.acks etc. override its defaults; ours are the safe ones
    settings = {"acks": "all", "enable_idempotence": True, "linger_ms": 5,
                "batch_size": 256 << 10, **options.client}
    producer = open_client(KafkaProducer, options.bootstrap, settings)
    errors: list[Exception] = []
    count = 0
    try:
        for batch in batches:
            _send_batch(producer, options, batch, errors)
            count += batch.num_rows
            if errors:
                break
        producer.flush()
    finally:
        producer.close()
    if errors:
        raise RuntimeError(f"commitgate sink: producing to {options.bootstrap} failed after "
                           f"{count} rows were sent: {errors[0]}") from errors[0]
    return TaskResult(records=count)


def _send_batch(producer: KafkaProducer, options: WriteOptions, batch: pa.RecordBatch,
                errors: list[Exception]) -> None:
    n = batch.num_rows
    columns = {name: batch.column(name).to_pylist() for name in batch.schema.names
               if name in ("key", "value", "topic", "partition", "headers")}
    values = [_to_bytes(v) for v in columns["value"]]
    keys = [_to_bytes(k) for k in columns.get("key", [None] * n)]
    topics = [options.topic] * n if options.topic else columns["topic"]
    partitions = columns.get("partition", [None] * n)
    headers = columns.get("headers", [None] * n)
    for i in range(n):
        if topics[i] is None:
            raise ValueError("null topic present in the data; use the 'topic' option for "
                             "setting a default topic")
        future = producer.send(topics[i], value=values[i], key=keys[i], partition=partitions[i],
                               headers=[(h["key"], h["value"]) for h in headers[i] or ()])
        future.add_errback(errors.append)


def _to_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
