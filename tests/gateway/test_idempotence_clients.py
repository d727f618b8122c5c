"""Real idempotent producers (kafka-python 3 by default, aiokafka and confluent-kafka with
idempotence on) against CommitGate: every record is stored once, in send order per partition,
in batches that carry the producer id and sequences the client used."""
from __future__ import annotations

import asyncio
import itertools

from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaProducer

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol.record_batch import iter_batch_headers
from tests.gateway.idempotent_wire import create, fetch_partition, stored

RECORDS = 300
PARTITIONS = 3


def _values(client_name: str) -> list[tuple[int, bytes]]:
    return [(i % PARTITIONS, b"%s-%d" % (client_name.encode(), i)) for i in range(RECORDS)]


def _create(bootstrap: str, topic: str) -> None:
    with WireClient(bootstrap) as client:
        create(client, topic, PARTITIONS)


def _check_stored_once(bootstrap: str, topic: str, sent: list[tuple[int, bytes]]) -> None:
    with WireClient(bootstrap) as client:
        for partition in range(PARTITIONS):
            expected = [value for p, value in sent if p == partition]
            assert [r.value for r in stored(client, topic, partition)] == expected
            headers = list(iter_batch_headers(fetch_partition(client, topic, partition)))
            assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
            sequences = [(h.base_sequence, h.last_sequence) for h in headers]
            assert sequences[0][0] == 0
            assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(sequences))


def test_kafka_python_default_producer_is_idempotent(broker):
    topic, sent = "idempotent-kafka-python", _values("kp")
    _create(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    futures = [producer.send(topic, value=value, partition=p) for p, value in sent]
    producer.flush()
    offsets = {(f.get(timeout=10).partition, f.get(timeout=10).offset) for f in futures}
    producer.close()
    assert len(offsets) == RECORDS
    _check_stored_once(broker.bootstrap, topic, sent)


def test_aiokafka_idempotent_producer(broker):
    topic, sent = "idempotent-aiokafka", _values("aio")
    _create(broker.bootstrap, topic)

    async def send_all() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                    linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=value, partition=p) for p, value in sent]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(send_all())
    _check_stored_once(broker.bootstrap, topic, sent)


def test_confluent_kafka_idempotent_producer(broker):
    topic, sent = "idempotent-confluent", _values("ck")
    _create(broker.bootstrap, topic)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for p, value in sent:
        producer.produce(topic, value=value, partition=p,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []
    _check_stored_once(broker.bootstrap, topic, sent)
