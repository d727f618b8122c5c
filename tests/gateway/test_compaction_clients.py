"""Compacted topics through real clients: the last value of every key survives cleaning at its
offset, confluent-kafka and kafka-python read the same, keyless records and bad compaction
configs are refused with Kafka's error codes."""
from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaConsumer, TopicPartition

from commitgate.launcher import BrokerProcess

TOPIC = "table"
RECORDS, KEYS, TOMBSTONES = 20_000, 500, 50
DEADLINE_S = 120


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data",
                            {"commitlog.segment.bytes": str(1 << 20),
                             "log.retention.check.interval.ms": "200"})
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _produce(broker, rng):
    """RECORDS records over KEYS keys, then TOMBSTONES tombstones, then one record of a new
    key (the last batch is never cleaned); returns the model {offset: (key, value)}."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    acked: dict[int, tuple[bytes, bytes | None]] = {}

    def on_delivery(error, message):
        assert error is None, error
        acked[message.offset()] = (message.key(), message.value())

    plan = [(f"k{rng.randrange(KEYS)}".encode(), f"v{i}".encode()) for i in range(RECORDS)]
    plan += [(f"k{i}".encode(), None) for i in rng.sample(range(KEYS), TOMBSTONES)]
    for key, value in plan:
        producer.produce(TOPIC, value, key, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.produce(TOPIC, b"end", b"the-end", partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(acked) == len(plan) + 1
    return acked


def _expected(model):
    last = {}
    for offset, (key, value) in sorted(model.items()):
        last[key] = (offset, key, value)
    return sorted(last.values())


def _read_confluent(broker):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "c-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    from confluent_kafka import TopicPartition as CTP
    consumer.assign([CTP(TOPIC, 0, 0)])
    end = consumer.get_watermark_offsets(CTP(TOPIC, 0), timeout=10)[1]
    out, deadline = [], time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append((message.offset(), message.key(), message.value()))
            if message.offset() >= end - 1:
                break
    finally:
        consumer.close()
    return out


def _read_kafka_python(broker):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    end = consumer.end_offsets([partition])[partition]
    out, deadline = [], time.monotonic() + 60
    try:
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                out += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return out


@pytest.mark.timeout(DEADLINE_S + 120)
def test_a_compacted_topic_keeps_the_last_value_of_every_key(broker):
    admin = _admin(broker)
    admin.create_topics([NewTopic(TOPIC, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
        # the last part written may stay below the ratio: cleaned 2 s after it was written
        "max.compaction.lag.ms": "2000", "delete.retention.ms": str(10**12)})])[TOPIC].result(30)
    model = _produce(broker, random.Random(5))
    expected = _expected(model)
    deadline, view = time.monotonic() + DEADLINE_S, None
    while time.monotonic() < deadline:  # the cleaner runs every 200 ms
        view = _read_kafka_python(broker)
        if view == expected:
            break
    assert view == expected, f"{len(view)} records read, {len(expected)} expected"
    assert sum(1 for _, _, value in view if value is None) == TOMBSTONES
    assert _read_confluent(broker) == expected


@pytest.mark.timeout(60)
def test_a_record_without_a_key_is_refused_on_a_compacted_topic(broker):
    admin = _admin(broker)
    admin.create_topics([NewTopic("keyed", 1, config={"cleanup.policy": "compact"})]
                        )["keyed"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0,
                         "message.timeout.ms": 20000})
    errors = []
    producer.produce("keyed", b"no key", on_delivery=lambda error, _m: errors.append(error))
    assert producer.flush(30) == 0  # alone in its batch: Kafka refuses a batch as a whole
    producer.produce("keyed", b"v", b"k", on_delivery=lambda error, _m: errors.append(error))
    assert producer.flush(30) == 0
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors
    assert errors[1] is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("config", [{"cleanup.policy": "foo"},
                                    {"min.cleanable.dirty.ratio": "1.5"},
                                    {"delete.retention.ms": "-5"}])
def test_bad_compaction_configs_are_refused(broker, config):
    name = "bad-" + str(abs(hash(str(config))))
    admin = _admin(broker)
    future = admin.create_topics([NewTopic(name, 1, config=config)])[name]
    with pytest.raises(KafkaException) as caught:
        future.result(30)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG
    # and by IncrementalAlterConfigs on a topic that exists
    admin.create_topics([NewTopic(name, 1)])[name].result(30)
    [(key, value)] = config.items()
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as caught:
        admin.incremental_alter_configs([resource])[resource].result(30)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG
