"""confluent-kafka 2.16 (librdkafka) against a real CommitGate: the shared client scenarios
(client_contract.py), run in process with the client's default settings (not idempotent by
default, ``consistent_random`` partitioner). librdkafka ties LZ4 to the broker's FindCoordinator
support: while the broker does not list it, ``compression.type=lz4`` sends uncompressed batches.

librdkafka's Consumer demands a ``group.id`` even when partitions are assigned by hand; one is
set, but only assign() with explicit offsets is used, so no group API (FindCoordinator, a later
issue) is needed. A consumer "from latest" starts at the offset ListOffsets(LATEST) returns.
"""
from __future__ import annotations

import functools

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway.client_contract import *  # the shared client tests
from tests.gateway.client_contract import (
    BASE_TS,
    CODEC_NAMES,
    CODEC_RECORDS,
    FIND_COORDINATOR_KEY,
    IDEMPOTENT_RECORDS,
    KEYED_RECORDS,
    KEYS_PARTITIONS,
    LARGE_TOPIC_MAX,
    LARGE_VALUE,
    MIDDLE,
    NULL_RECORDS,
    TIME_QUERIES,
    ClientTraits,
    advertised_apis,
    describe,
    large_report,
    librdkafka_partition,
    run_scenarios,
)

PREFIX = "confluent"
TIMEOUT_S = 30.0
POLL_S = 0.2
CONSUME_ROUNDS = 150  # x POLL_S: how long a consumer waits for the records it expects


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create(self, name: str, partitions: int, configs: dict | None = None) -> str:
        topic = f"{PREFIX}-{name}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(topic, partitions, 1,
                                                    config=configs or {})]).values():
            future.result(TIMEOUT_S)
        return topic

    def produce(self, topic: str, records: list, **settings) -> list[dict]:
        """Produce ``records`` (key, value, headers); the delivery reports, in send order."""
        producer = Producer({"bootstrap.servers": self.bootstrap, **settings})
        delivered: list[dict | None] = [None] * len(records)  # reports come batch by batch
        errors: list = []

        def on_delivery(index: int, error, message) -> None:
            if error is not None:
                errors.append(error)
            offset = message.offset()  # acks=0: none
            delivered[index] = describe(message.partition(),
                                        -1 if offset is None or offset < 0 else offset,
                                        *records[index])

        for index, (key, value, headers) in enumerate(records):
            producer.produce(topic, key=key, value=value, headers=headers or None,
                             on_delivery=functools.partial(on_delivery, index))
        assert producer.flush(TIMEOUT_S) == 0, "records left undelivered"
        if errors:
            raise KafkaException(errors[0])
        return delivered

    def consumer(self) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False})

    def consume(self, topic: str, partitions: int, expected: int,
                offset: int = OFFSET_BEGINNING) -> list[dict]:
        consumer = self.consumer()
        try:
            consumer.assign([TopicPartition(topic, p, offset) for p in range(partitions)])
            out: list[dict] = []
            for _ in range(CONSUME_ROUNDS):
                if len(out) >= expected:
                    break
                for m in consumer.consume(expected - len(out), POLL_S):
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    out.append(describe(m.partition(), m.offset(), m.key(), m.value(),
                                        m.headers()))
            return out
        finally:
            consumer.close()

    def round_trip(self, topic: str, partitions: int, records: list, **settings) -> dict:
        sent = self.produce(topic, records, **settings)
        return {"topic": topic, "sent": sent,
                "received": self.consume(topic, partitions, len(records))}

    # ---- scenarios ------------------------------------------------------------------------------

    def codec(self, codec: str) -> dict:
        topic = self.create(f"codec-{codec}", 1)
        out = self.round_trip(topic, 1, CODEC_RECORDS, **{"compression.type": codec,
                                                          "linger.ms": 100})
        middle = self.consume(topic, 1, len(CODEC_RECORDS) - MIDDLE, MIDDLE)
        return {**out, "from_middle": [r["offset"] for r in middle]}

    def log_append_time(self) -> dict:
        topic = self.create("log-append-time", 1, {"message.timestamp.type": "LogAppendTime"})
        producer = Producer({"bootstrap.servers": self.bootstrap, "compression.type": "gzip",
                             "linger.ms": 100})
        for i in range(5):
            producer.produce(topic, b"lat-%d" % i, timestamp=BASE_TS + i)
        assert producer.flush(TIMEOUT_S) == 0, "records left undelivered"
        consumer = self.consumer()
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            messages = []
            for _ in range(CONSUME_ROUNDS):
                if len(messages) >= 5:
                    break
                messages += consumer.consume(5 - len(messages), POLL_S)
        finally:
            consumer.close()
        stamps = [m.timestamp() for m in messages]
        return {"topic": topic, "timestamps": [ts for _, ts in stamps],
                "log_append_time": [kind == TIMESTAMP_LOG_APPEND_TIME for kind, _ in stamps]}

    def auto_create(self) -> dict:
        topic = f"{PREFIX}-auto-created"
        return self.round_trip(topic, 1, [(None, b"auto-%d" % i, []) for i in range(3)])

    def keys(self) -> dict:
        topic = self.create("keys", KEYS_PARTITIONS)
        records = [(k, v, []) for k, v in KEYED_RECORDS]
        return {**self.round_trip(topic, KEYS_PARTITIONS, records), "partitions": KEYS_PARTITIONS}

    def nulls(self) -> dict:
        return self.round_trip(self.create("nulls", 1), 1, NULL_RECORDS)

    def large(self) -> dict:
        topic = self.create("large", 1, {"max.message.bytes": str(LARGE_TOPIC_MAX)})
        [sent] = self.produce(topic, [(None, LARGE_VALUE, [])],
                              **{"message.max.bytes": LARGE_TOPIC_MAX})
        received = self.consume(topic, 1, 1)
        value = bytes.fromhex(received[0]["value"]) if received else b""
        return large_report(topic, sent["offset"], value)

    def too_large(self) -> dict:
        topic = self.create("too-large", 1)
        try:
            self.produce(topic, [(None, LARGE_VALUE, [])], **{"message.max.bytes": LARGE_TOPIC_MAX})
        except KafkaException as exc:
            return {"topic": topic, "refused": exc.args[0].name()}
        return {"topic": topic, "refused": None}

    def offsets(self) -> dict:
        topic = self.create("offsets", 1)
        producer = Producer({"bootstrap.servers": self.bootstrap})
        consumer = self.consumer()
        try:
            for i in range(5):
                producer.produce(topic, b"old-%d" % i, timestamp=BASE_TS + i * 1000)
            producer.flush(TIMEOUT_S)
            tp = TopicPartition(topic, 0)
            _, latest = consumer.get_watermark_offsets(tp, TIMEOUT_S)  # ListOffsets(LATEST)
            for i in range(5, 8):
                producer.produce(topic, b"new-%d" % i, timestamp=BASE_TS + i * 1000)
            producer.flush(TIMEOUT_S)
            by_time = []
            for query, _, _ in TIME_QUERIES:
                [found] = consumer.offsets_for_times([TopicPartition(topic, 0, query)], TIMEOUT_S)
                by_time.append({"query": query, "offset": found.offset if found.offset >= 0
                                else None, "timestamp": None})
            beginning, end = consumer.get_watermark_offsets(tp, TIMEOUT_S)
        finally:
            consumer.close()
        return {"topic": topic, "latest_position": latest,
                "latest_received": [r["offset"] for r in self.consume(topic, 1, 3, latest)],
                "earliest_received": [r["offset"] for r in self.consume(topic, 1, 8)],
                "by_time": by_time, "beginning": beginning, "end": end}

    def acks(self) -> dict:
        topic = self.create("acks", 1)
        sent = []
        for acks in ("0", "1", "all"):
            records = [(b"acks-%s" % acks.encode(), b"%s-%d" % (acks.encode(), i), [])
                       for i in range(10)]
            # acks=0 reports no offset; librdkafka keeps one partition's records in order
            sent += self.produce(topic, records, acks=acks)
        return {"topic": topic, "sent": sent, "received": self.consume(topic, 1, 30)}

    def idempotent(self) -> dict:
        topic = self.create("idempotent", 1)
        records = [(k, v, []) for k, v in IDEMPOTENT_RECORDS]
        return self.round_trip(topic, 1, records, **{"enable.idempotence": True,
                                                     "batch.size": 512, "linger.ms": 5})


@pytest.fixture(scope="module")
def reports(broker) -> dict:
    driver = Driver(broker.bootstrap)
    bodies = {f"codec-{c}": (lambda c=c: driver.codec(c)) for c in CODEC_NAMES}
    return run_scenarios(bodies | {
        "keys": driver.keys, "nulls": driver.nulls, "large": driver.large,
        "too-large": driver.too_large, "offsets": driver.offsets, "acks": driver.acks,
        "idempotent": driver.idempotent, "auto-create": driver.auto_create,
        "log-append-time": driver.log_append_time})


@pytest.fixture(scope="module")
def traits(broker) -> ClientTraits:
    # librdkafka turns LZ4 on only when the broker lists FindCoordinator (rdkafka_feature.c);
    # without it, compression.type=lz4 sends uncompressed batches
    groups = FIND_COORDINATOR_KEY in advertised_apis(broker.bootstrap)
    return ClientTraits(partition_of=librdkafka_partition, idempotent_by_default=False,
                        too_large_error="MSG_SIZE_TOO_LARGE", reports_timestamps=False,
                        uncompressed_codecs=frozenset() if groups else frozenset({"lz4"}),
                        compresses_only_when_smaller=True)
