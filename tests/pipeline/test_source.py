"""The `commitgate` Spark data source against a real broker: batch write, batch read, options."""
from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

ROWS = 3000
PARTITIONS = 3
HEADERS_TYPE = "array<struct<key string, value binary>>"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("commitgate").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def expected_row(i: int) -> tuple:
    return (f"key-{i}".encode(), bytes([i % 256]) * (i % 50) + b"|%d" % i, i % PARTITIONS,
            [("n", str(i).encode()), ("empty", b"")] if i % 2 else [])


@pytest.fixture(scope="module")
def written(spark, broker) -> tuple[float, float]:
    """ROWS rows written through the sink to topic 'rt', partition chosen by a column."""
    create_topic(broker.bootstrap, "rt", PARTITIONS)
    schema = f"key binary, value binary, partition int, headers {HEADERS_TYPE}"
    frame = spark.createDataFrame([expected_row(i) for i in range(ROWS)], schema)
    before = time.time()
    (frame.repartition(2).write.format("commitgate").option("kafka.bootstrap.servers",
                                                            broker.bootstrap)
     .option("topic", "rt").mode("append").save())
    return before, time.time()


def test_write_then_read_back(spark, broker, written):
    before, after = written
    rows = read(spark, broker.bootstrap, subscribe="rt", includeHeaders="true").collect()
    assert len(rows) == ROWS
    by_key = {row.key: row for row in rows}
    assert len(by_key) == ROWS
    for i in range(ROWS):
        key, value, partition, headers = expected_row(i)
        row = by_key[key]
        assert (row.value, row.topic, row.partition) == (value, "rt", partition)
        assert [(h.key, h.value) for h in row.headers] == headers
        assert row.timestampType == 0
        assert before - 1 <= row.timestamp.timestamp() <= after + 1
    for partition in range(PARTITIONS):
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(ROWS // PARTITIONS))
    # without includeHeaders the schema is Spark's Kafka source's own
    assert read(spark, broker.bootstrap, subscribe="rt").schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")


def test_offset_bounds(spark, broker, written):
    starting = json.dumps({"rt": {"0": 10, "1": -2, "2": 999}})
    ending = json.dumps({"rt": {"0": 20, "1": 5, "2": -1}})
    rows = read(spark, broker.bootstrap, subscribe="rt", startingOffsets=starting,
                endingOffsets=ending).select("partition", "offset").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == ([(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
                   + [(2, 999)])
    with pytest.raises(PySparkException, match=r"'latest' .* not allowed for batch"):
        read(spark, broker.bootstrap, subscribe="rt", startingOffsets="latest").collect()
    assign = read(spark, broker.bootstrap, assign=json.dumps({"rt": [1]}),
                  startingOffsets="earliest", endingOffsets=json.dumps({"rt": {"1": 7}}))
    assert sorted(r.offset for r in assign.collect() if r.partition == 1) == list(range(7))
    assert assign.count() == 7
    with pytest.raises(PySparkException, match=r"startingOffsets.*every topic-partition"):
        read(spark, broker.bootstrap, subscribe="rt",
             startingOffsets=json.dumps({"rt": {"0": 1}})).collect()


def test_bad_options_name_the_option(spark, broker, written):
    with pytest.raises(PySparkException, match=r"startingOffsets.*expected 'earliest'"):
        read(spark, broker.bootstrap, subscribe="rt", startingOffsets="{oops").collect()
    with pytest.raises(PySparkException, match=r"does not exist"):
        read(spark, broker.bootstrap, subscribe="no-such-topic").collect()
    with pytest.raises(PySparkException, match=r"unknown option.*'startingoffset'"):
        read(spark, broker.bootstrap, subscribe="rt", startingOffset="earliest").collect()
    frame = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match=r"topic option required"):
        frame.write.format("commitgate").option("kafka.bootstrap.servers", broker.bootstrap) \
            .mode("append").save()


def test_subscribe_pattern_and_topic_column(spark, broker):
    for name in ("pat-a", "pat-b", "other-pat-c"):
        create_topic(broker.bootstrap, name, 1)
    frame = spark.createDataFrame([(t, f"{t}-{i}") for t in ("pat-a", "pat-b", "other-pat-c")
                                   for i in range(5)], "topic string, value string")
    frame.write.format("commitgate").option("kafka.bootstrap.servers", broker.bootstrap) \
        .mode("append").save()
    rows = read(spark, broker.bootstrap, subscribePattern="pat-.*").collect()
    assert sorted((r.topic, r.value) for r in rows) == sorted(
        (t, f"{t}-{i}".encode()) for t in ("pat-a", "pat-b") for i in range(5))


def test_min_partitions_splits_ranges(spark, broker):
    create_topic(broker.bootstrap, "split", 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(1000):
        producer.send("split", value=b"%d" % i, partition=0 if i < 900 else 1)
    producer.flush()
    producer.close()
    frame = read(spark, broker.bootstrap, subscribe="split", minPartitions="5")
    assert frame.rdd.getNumPartitions() == 5  # the 900-record range in 4 (or 5), the other 1
    rows = frame.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, o) for o in range(900)] + [(1, o) for o in range(100)])
    assert read(spark, broker.bootstrap, subscribe="split").rdd.getNumPartitions() == 2


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_reads_compressed_topic_from_kafka_python(spark, broker, codec):
    topic = f"compressed-{codec}"
    create_topic(broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type=codec, linger_ms=20)
    sent = [(b"k%d" % i, b"value-%d-" % i * 20, 1_700_000_000_000 + i, [("h", b"%d" % i)])
            for i in range(2000)]
    for key, value, ts, headers in sent:
        producer.send(topic, key=key, value=value, timestamp_ms=ts, headers=headers)
    producer.flush()
    producer.close()
    rows = read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true") \
        .orderBy("offset").collect()
    assert [(r.key, r.value, round(r.timestamp.timestamp() * 1000),
             [(h.key, h.value) for h in r.headers]) for r in rows] == sent
    assert [r.offset for r in rows] == list(range(len(sent)))


def test_fail_on_data_loss(spark, broker):
    create_topic(broker.bootstrap, "trimmed", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(100):
        producer.send("trimmed", value=b"%d" % i)
    producer.flush()
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.delete_records({TopicPartition("trimmed", 0): 40})
    admin.close()
    wait_log_start(broker.bootstrap, TopicPartition("trimmed", 0), 40)
    starting = json.dumps({"trimmed": {"0": 10}})
    with pytest.raises(PySparkException, match=r"from offset 10 to 39 .*log start offset 40"):
        read(spark, broker.bootstrap, subscribe="trimmed", startingOffsets=starting).collect()
    rows = read(spark, broker.bootstrap, subscribe="trimmed", startingOffsets=starting,
                failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(40, 100))
    assert all(r.value == b"%d" % r.offset for r in rows)


def wait_log_start(bootstrap: str, tp: TopicPartition, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 30
        while consumer.beginning_offsets([tp])[tp] < offset:
            assert time.monotonic() < deadline, f"log start of {tp} never reached {offset}"
            time.sleep(0.1)
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, first: int, count: int, partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(first, first + count):
        producer.send(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % partitions)
    producer.flush()
    producer.close()


def run_stream_once(spark: SparkSession, bootstrap: str, topic: str, out: str, checkpoint: str,
                    **options: str) -> list[int]:
    """Start the query from its checkpoint, process what is there, stop: rows per micro-batch."""
    reader = (spark.readStream.format("commitgate").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().select("key", "value", "partition", "offset").writeStream
             .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_stream_resumes_from_checkpoint(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-in", 2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    produce(broker.bootstrap, "stream-in", 0, 200, 2)
    run_stream_once(spark, broker.bootstrap, "stream-in", out, checkpoint)
    assert spark.read.parquet(out).count() == 200
    produce(broker.bootstrap, "stream-in", 200, 150, 2)
    run_stream_once(spark, broker.bootstrap, "stream-in", out, checkpoint)
    rows = spark.read.parquet(out).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (i % 2, i // 2) for i in range(350))
    assert sorted(int(r.key) for r in rows) == list(range(350))
    assert all(r.value == b"v" + r.key for r in rows)


def test_stream_max_offsets_per_trigger(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-rate", 2)
    produce(broker.bootstrap, "stream-rate", 0, 200, 2)
    out = str(tmp_path / "out")
    batches = run_stream_once(spark, broker.bootstrap, "stream-rate", out,
                              str(tmp_path / "checkpoint"), maxOffsetsPerTrigger="60")
    assert batches == [60, 60, 60, 20]
    assert sorted(int(r.key) for r in spark.read.parquet(out).collect()) == list(range(200))


def test_timestamp_bounds(spark, broker):
    base = 1_700_000_000_000
    create_topic(broker.bootstrap, "timed", 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(200):  # record i: partition i % 2, offset i // 2, time base + 10 i
        producer.send("timed", value=b"%d" % i, partition=i % 2, timestamp_ms=base + 10 * i)
    producer.flush()
    producer.close()
    rows = read(spark, broker.bootstrap, subscribe="timed", startingTimestamp=str(base + 1000),
                endingOffsetsByTimestamp=json.dumps({"timed": {"0": base + 1500,
                                                               "1": base + 10**6}})).collect()
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, o) for o in range(50, 75)] + [(1, o) for o in range(50, 100)])
    late = str(base + 10**6)
    with pytest.raises(PySparkException, match=r"timed-0 has no record at or after"):
        read(spark, broker.bootstrap, subscribe="timed", startingTimestamp=late).collect()
    assert read(spark, broker.bootstrap, subscribe="timed", startingTimestamp=late,
                startingOffsetsByTimestampStrategy="latest").count() == 0


def test_stream_write(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "echo-in", 2)
    create_topic(broker.bootstrap, "echo-out", 1)
    produce(broker.bootstrap, "echo-in", 0, 300, 2)
    stream = (spark.readStream.format("commitgate").option("kafka.bootstrap.servers",
                                                           broker.bootstrap)
              .option("subscribe", "echo-in").option("startingOffsets", "earliest").load())
    query = (stream.selectExpr("key", "concat(value, cast('!' as binary)) AS value")
             .writeStream.format("commitgate").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", "echo-out").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = read(spark, broker.bootstrap, subscribe="echo-out").collect()
    assert sorted((int(r.key), r.value) for r in rows) == [(i, b"v%d!" % i) for i in range(300)]
