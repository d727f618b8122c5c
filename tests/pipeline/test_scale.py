"""The issue's scale tests: 100,000 records read from, and written to, 4-partition topics."""
from __future__ import annotations

import hashlib

import pyarrow as pa
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession

from tests.pipeline.test_source import create_topic, read

RECORDS = 100_000
PARTITIONS = 4
BASE_TIME = 1_700_000_000_000


def record(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Record i: a key, a small binary value (any byte) and one or no headers."""
    value = hashlib.sha256(b"%d" % i).digest()[: i % 33]
    headers = [("i", b"%d" % i), ("odd", b"")] if i % 2 else []
    return b"k%d" % i, value, headers


def produce(bootstrap: str, topic: str) -> None:
    """Record i to partition i % 4 at time BASE_TIME + i, through confluent-kafka (fast)."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "queue.buffering.max.messages": RECORDS * 2})

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for i in range(RECORDS):
        key, value, headers = record(i)
        producer.produce(topic, value=value, key=key, partition=i % PARTITIONS,
                         timestamp=BASE_TIME + i, headers=headers, on_delivery=delivered)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "records still undelivered after 120 s"
    assert not failures, failures[:3]


def arrow_rows(frame: DataFrame) -> dict[str, list]:
    table: pa.Table = frame.toArrow()
    return {name: table.column(name).to_pylist() for name in table.column_names}


def check_partition_offsets(columns: dict[str, list]) -> None:
    by_partition: dict[int, list[int]] = {}
    for partition, offset in zip(columns["partition"], columns["offset"]):
        by_partition.setdefault(partition, []).append(offset)
    assert {p: sorted(o) for p, o in by_partition.items()} == {
        p: list(range(RECORDS // PARTITIONS)) for p in range(PARTITIONS)}


def test_batch_read_100k(spark: SparkSession, broker):
    create_topic(broker.bootstrap, "scale-in", PARTITIONS)
    produce(broker.bootstrap, "scale-in")
    columns = arrow_rows(read(spark, broker.bootstrap, subscribe="scale-in",
                              includeHeaders="true"))
    assert len(columns["key"]) == RECORDS
    check_partition_offsets(columns)
    seen = set()
    for key, value, partition, offset, stamp, kind, headers in zip(
            columns["key"], columns["value"], columns["partition"], columns["offset"],
            columns["timestamp"], columns["timestampType"], columns["headers"]):
        i = int(key[1:])
        seen.add(i)
        assert (key, value, [(h["key"], h["value"]) for h in headers]) == record(i)
        assert (partition, offset) == (i % PARTITIONS, i // PARTITIONS)
        assert round(stamp.timestamp() * 1000) == BASE_TIME + i and kind == 0
    assert len(seen) == RECORDS


def test_batch_write_100k_reads_back_identical(spark: SparkSession, broker):
    create_topic(broker.bootstrap, "scale-out", PARTITIONS)
    # rows generated in the JVM: key "k<i>", value sha256(i)[:i % 33], partition i % 4
    frame = spark.range(RECORDS, numPartitions=4).selectExpr(
        "cast(concat('k', id) as binary) AS key",
        "substring(unhex(sha2(cast(id as string), 256)), 1, cast(id % 33 as int)) AS value",
        "cast(id % 4 as int) AS partition",
        "if(id % 2 = 1, array(named_struct('key', 'i', 'value', cast(cast(id as string) "
        "as binary)), named_struct('key', 'odd', 'value', cast('' as binary))), "
        "array()) AS headers")
    (frame.write.format("commitgate").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", "scale-out").mode("append").save())
    columns = arrow_rows(read(spark, broker.bootstrap, subscribe="scale-out",
                              includeHeaders="true"))
    assert len(columns["key"]) == RECORDS
    check_partition_offsets(columns)
    got = {key: (value, partition, [(h["key"], h["value"]) for h in headers])
           for key, value, partition, headers in zip(columns["key"], columns["value"],
                                                     columns["partition"], columns["headers"])}
    assert len(got) == RECORDS
    for i in range(RECORDS):
        key, value, headers = record(i)
        assert got[key] == (value, i % PARTITIONS, headers), i
