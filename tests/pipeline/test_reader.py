"""The executors' librdkafka reader (read_range) alone against a real broker, no Spark: the paths
a Spark job rarely reaches, records deleted after planning and a range the broker never fills."""
from __future__ import annotations

import pyarrow as pa
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from commitgate.pipeline.kafka_read import DataLossError, OffsetRange, read_range
from commitgate.pipeline.options import parse_read
from tests.pipeline.test_source import create_topic, wait_log_start

TOPIC = "reader-trimmed"
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()),
                    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                    ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                    ("value", pa.binary())])))])
NO_HEADERS = pa.schema(list(SCHEMA)[:7])


@pytest.fixture(scope="module")
def trimmed(broker) -> str:
    """100 records with headers, the first 40 deleted: the log starts at offset 40."""
    create_topic(broker.bootstrap, TOPIC, 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(100):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
    producer.flush()
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.delete_records({TopicPartition(TOPIC, 0): 40})
    admin.close()
    wait_log_start(broker.bootstrap, TopicPartition(TOPIC, 0), 40)
    return broker.bootstrap


def rows(bootstrap: str, start: int, end: int, **options: str) -> list[dict]:
    parsed = parse_read({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC,
                         "includeHeaders": "true", **options})
    return [row for batch in read_range(parsed, OffsetRange(TOPIC, 0, start, end), SCHEMA)
            for row in batch.to_pylist()]


def test_reads_exactly_the_range_with_every_column(trimmed):
    read = rows(trimmed, 50, 60)
    assert [r["offset"] for r in read] == list(range(50, 60))
    first = read[0]
    assert (first["key"], first["value"], first["topic"], first["partition"]) == \
        (b"k50", b"v50", TOPIC, 0)
    assert first["headers"] == [{"key": "h", "value": b"50"}]
    assert first["timestampType"] == 0 and first["timestamp"].year >= 2024


def test_deleted_records_follow_fail_on_data_loss(trimmed):
    with pytest.raises(DataLossError, match=rf"{TOPIC}-0 from offset 10 to 39 .*log start "
                                            r"offset 40.*'failOnDataLoss'"):
        rows(trimmed, 10, 100)
    assert [r["offset"] for r in rows(trimmed, 10, 100, failOnDataLoss="false")] == \
        list(range(40, 100))


def test_a_range_the_broker_never_fills_times_out_naming_it(trimmed):
    with pytest.raises(TimeoutError, match=rf"no records of {TOPIC}-0 at offset 100 within "
                                           r"kafkaConsumer.pollTimeoutMs=2000"):
        rows(trimmed, 90, 200, **{"kafkaConsumer.pollTimeoutMs": "2000"})


def test_an_open_transaction_is_read_as_the_isolation_level_says(broker):
    """Planning and reading agree: read_uncommitted (Spark's default) reads the open
    transaction's records; kafka.isolation.level=read_committed plans and reads to the LSO."""
    from confluent_kafka import Producer

    from commitgate.pipeline.kafka_read import plan_ranges

    create_topic(broker.bootstrap, "reader-txn", 1)
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    plain.send("reader-txn", b"before", partition=0).get(timeout=30)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "reader-open"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("reader-txn", b"open", partition=0)
    txn.flush(30)
    plain.send("reader-txn", b"after", partition=0).get(timeout=30)
    plain.close()
    try:
        everything = [b"before", b"open", b"after"]
        for level, values in ((None, everything), ("read_uncommitted", everything),
                              ("read_committed", [b"before"])):
            chosen = {"kafka.isolation.level": level} if level else {}
            options = parse_read({"kafka.bootstrap.servers": broker.bootstrap,
                                  "subscribe": "reader-txn", **chosen,
                                  "kafkaConsumer.pollTimeoutMs": "20000"})
            [planned] = plan_ranges(options)
            read = [row["value"] for batch in read_range(options, planned, NO_HEADERS)
                    for row in batch.to_pylist()]
            assert read == values, level
    finally:
        txn.abort_transaction(30)
