"""kafka-python 3 against a real CommitGate: admin, produce, consume, codecs, headers."""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    records = []
    for record in consumer:
        records.append(record)
        if len(records) >= expected:
            break
    consumer.close()
    return records


def test_create_produce_consume_round_trip(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-roundtrip", 3, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("kp-roundtrip", 3, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    sent = {}
    for i in range(300):
        meta = producer.send("kp-roundtrip", key=b"key-%d" % i, value=b"value-%d" % i,
                             headers=[("h", b"%d" % i)]).get(timeout=10)
        sent[(meta.partition, meta.offset)] = i
    producer.close()
    records = _consume(broker.bootstrap, "kp-roundtrip", 3, 300)
    assert len(records) == 300
    for r in records:
        i = sent[(r.partition, r.offset)]
        assert (r.key, r.value, r.headers) == (b"key-%d" % i, b"value-%d" % i, [("h", b"%d" % i)])
    per_partition = {}
    for r in records:
        per_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_round_trip(broker, codec):
    topic = f"kp-codec-{codec or 'none'}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                             linger_ms=20, batch_size=64 * 1024)
    values = [bytes([i % 251]) * (i * 37 % 2000) for i in range(200)]
    futures = [producer.send(topic, value=v) for v in values]
    producer.flush()
    assert all(f.get(timeout=10).topic == topic for f in futures)
    producer.close()
    records = _consume(broker.bootstrap, topic, 1, len(values))
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(len(values)))


def test_null_key_and_value(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("kp-nulls", key=None, value=b"v").get(timeout=10)  # both null: refused
    producer.send("kp-nulls", key=b"k", value=None).get(timeout=10)
    producer.close()
    records = _consume(broker.bootstrap, "kp-nulls", 1, 2)
    assert [(r.key, r.value) for r in records] == [(None, b"v"), (b"k", None)]


def test_offsets_for_times_and_end_offsets(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("kp-times", value=b"x", timestamp_ms=1_000_000 + i * 1000).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition("kp-times", 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    found = consumer.offsets_for_times({tp: 1_004_500})[tp]
    assert (found.offset, found.timestamp) == (5, 1_005_000)
    assert consumer.offsets_for_times({tp: 2_000_000})[tp] is None
    consumer.close()
