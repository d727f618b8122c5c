"""1,000 partitions: created, written and read back through real clients."""
from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

PARTITIONS = 1000


def test_thousand_partitions_round_trip(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("wide", PARTITIONS, 1)])
    admin.close()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    delivered = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered[msg.partition()] = msg.offset()

    for p in range(PARTITIONS):
        producer.produce("wide", value=b"p%d" % p, key=b"k", partition=p, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert delivered == {p: 0 for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("wide", p, 0) for p in range(PARTITIONS)])
    seen = {}
    for _ in range(600):
        for message in consumer.consume(1000, 0.1):
            assert message.error() is None, message.error()
            seen[message.partition()] = message.value()
        if len(seen) == PARTITIONS:
            break
    consumer.close()
    assert seen == {p: b"p%d" % p for p in range(PARTITIONS)}
