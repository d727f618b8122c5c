"""aiokafka 0.14 against a real CommitGate: the shared client scenarios (client_contract.py),
run in process with the client's default settings (not idempotent by default). Consumers use
assign() without a group: consumer groups arrive with a later issue."""
from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.gateway.client_contract import *  # the shared client tests
from tests.gateway.client_contract import (
    BASE_TS,
    CODEC_NAMES,
    CODEC_RECORDS,
    IDEMPOTENT_RECORDS,
    KEYED_RECORDS,
    KEYS_PARTITIONS,
    LARGE_TOPIC_MAX,
    LARGE_VALUE,
    MIDDLE,
    NULL_RECORDS,
    TIME_QUERIES,
    ClientTraits,
    describe,
    java_partition,
    large_report,
    run_scenarios,
)

PREFIX = "aiokafka"
LOG_APPEND_TIME = 1  # ConsumerRecord.timestamp_type
POLL_MS = 200
CONSUME_ROUNDS = 150  # x POLL_MS: how long a consumer waits for the records it expects


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    async def create(self, name: str, partitions: int, configs: dict | None = None) -> str:
        topic = f"{PREFIX}-{name}"
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            response = await admin.create_topics([NewTopic(topic, partitions, 1,
                                                            topic_configs=configs or {})])
            assert all(error == 0 for _, error, _ in response.topic_errors), response
        finally:
            await admin.close()
        return topic

    def consumer(self, reset: str = "earliest") -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                auto_offset_reset=reset)

    async def produce(self, topic: str, records: list, **settings) -> list[dict]:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **settings)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=key, value=value, headers=headers)
                       for key, value, headers in records]
            await producer.flush()
            metas = [await f for f in futures]
        finally:
            await producer.stop()
        return [describe(m.partition, m.offset, *r) for m, r in zip(metas, records, strict=True)]

    async def consume(self, topic: str, partitions: int, expected: int) -> list[dict]:
        consumer = self.consumer()
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            return await _poll(consumer, expected)
        finally:
            await consumer.stop()

    async def round_trip(self, topic: str, partitions: int, records: list, **settings) -> dict:
        sent = await self.produce(topic, records, **settings)
        return {"topic": topic, "sent": sent,
                "received": await self.consume(topic, partitions, len(records))}

    # ---- scenarios ------------------------------------------------------------------------------

    async def codec(self, codec: str) -> dict:
        topic = await self.create(f"codec-{codec}", 1)
        out = await self.round_trip(topic, 1, CODEC_RECORDS, linger_ms=20,
                                    compression_type=None if codec == "none" else codec)
        consumer = self.consumer()
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, MIDDLE)
            middle = await _poll(consumer, len(CODEC_RECORDS) - MIDDLE)
        finally:
            await consumer.stop()
        return {**out, "from_middle": [r["offset"] for r in middle]}

    async def log_append_time(self) -> dict:
        topic = await self.create("log-append-time", 1,
                                  {"message.timestamp.type": "LogAppendTime"})
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, compression_type="gzip",
                                    linger_ms=20)
        await producer.start()
        try:
            futures = [await producer.send(topic, b"lat-%d" % i, timestamp_ms=BASE_TS + i)
                       for i in range(5)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = self.consumer()
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            records = []
            for _ in range(CONSUME_ROUNDS):
                if len(records) >= 5:
                    break
                for batch in (await consumer.getmany(timeout_ms=POLL_MS)).values():
                    records += batch
        finally:
            await consumer.stop()
        return {"topic": topic, "timestamps": [r.timestamp for r in records],
                "log_append_time": [r.timestamp_type == LOG_APPEND_TIME for r in records]}

    async def auto_create(self) -> dict:
        topic = f"{PREFIX}-auto-created"
        return await self.round_trip(topic, 1, [(None, b"auto-%d" % i, []) for i in range(3)])

    async def keys(self) -> dict:
        topic = await self.create("keys", KEYS_PARTITIONS)
        records = [(k, v, []) for k, v in KEYED_RECORDS]
        return {**await self.round_trip(topic, KEYS_PARTITIONS, records),
                "partitions": KEYS_PARTITIONS}

    async def nulls(self) -> dict:
        records = [r for r in NULL_RECORDS if r[:2] != (None, None)]  # refused by aiokafka
        return await self.round_trip(await self.create("nulls", 1), 1, records)

    async def large(self) -> dict:
        topic = await self.create("large", 1, {"max.message.bytes": str(LARGE_TOPIC_MAX)})
        [sent] = await self.produce(topic, [(None, LARGE_VALUE, [])],
                                    max_request_size=LARGE_TOPIC_MAX)
        received = await self.consume(topic, 1, 1)
        value = bytes.fromhex(received[0]["value"]) if received else b""
        return large_report(topic, sent["offset"], value)

    async def too_large(self) -> dict:
        topic = await self.create("too-large", 1)
        try:
            await self.produce(topic, [(None, LARGE_VALUE, [])], max_request_size=LARGE_TOPIC_MAX)
        except Exception as exc:  # noqa: BLE001 - the test judges which error it was
            return {"topic": topic, "refused": type(exc).__name__}
        return {"topic": topic, "refused": None}

    async def offsets(self) -> dict:
        topic = await self.create("offsets", 1)
        tp = TopicPartition(topic, 0)
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap)
        latest = self.consumer("latest")
        await producer.start()
        await latest.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, b"old-%d" % i, timestamp_ms=BASE_TS + i * 1000)
            latest.assign([tp])
            position = await latest.position(tp)
            for i in range(5, 8):
                await producer.send_and_wait(topic, b"new-%d" % i, timestamp_ms=BASE_TS + i * 1000)
            latest_received = [r["offset"] for r in await _poll(latest, 3)]
            by_time = []
            for query, _, _ in TIME_QUERIES:
                found = (await latest.offsets_for_times({tp: query}))[tp]
                by_time.append({"query": query, "offset": found and found.offset,
                                "timestamp": found and found.timestamp})
            return {"topic": topic, "latest_position": position,
                    "latest_received": latest_received,
                    "earliest_received": [r["offset"] for r in await self.consume(topic, 1, 8)],
                    "by_time": by_time, "beginning": (await latest.beginning_offsets([tp]))[tp],
                    "end": (await latest.end_offsets([tp]))[tp]}
        finally:
            await latest.stop()
            await producer.stop()

    async def acks(self) -> dict:
        topic = await self.create("acks", 1)
        sent = []
        for acks, label in ((0, "0"), (1, "1"), ("all", "all")):
            records = [(b"acks-" + label.encode(), b"%s-%d" % (label.encode(), i), [])
                       for i in range(10)]
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=acks)
            await producer.start()
            try:
                for key, value, _ in records:  # one at a time, so the order is known
                    meta = await producer.send_and_wait(topic, value, key=key)
                    offset = meta.offset if meta else -1  # acks=0: no answer
                    sent.append(describe(0, offset, key, value, []))
            finally:
                await producer.stop()
        return {"topic": topic, "sent": sent, "received": await self.consume(topic, 1, 30)}

    async def idempotent(self) -> dict:
        topic = await self.create("idempotent", 1)
        records = [(k, v, []) for k, v in IDEMPOTENT_RECORDS]
        return await self.round_trip(topic, 1, records, enable_idempotence=True,
                                     max_batch_size=512, linger_ms=5)


async def _poll(consumer: AIOKafkaConsumer, expected: int) -> list[dict]:
    out: list[dict] = []
    for _ in range(CONSUME_ROUNDS):
        if len(out) >= expected:
            break
        for records in (await consumer.getmany(timeout_ms=POLL_MS)).values():
            out += [describe(r.partition, r.offset, r.key, r.value, list(r.headers))
                    for r in records]
    return out


@pytest.fixture(scope="module")
def reports(broker) -> dict:
    driver = Driver(broker.bootstrap)
    bodies = {f"codec-{c}": (lambda c=c: driver.codec(c)) for c in CODEC_NAMES}
    bodies |= {"keys": driver.keys, "nulls": driver.nulls, "large": driver.large,
               "too-large": driver.too_large, "offsets": driver.offsets, "acks": driver.acks,
               "idempotent": driver.idempotent, "auto-create": driver.auto_create,
               "log-append-time": driver.log_append_time}
    return run_scenarios({name: (lambda body=body: asyncio.run(body()))
                          for name, body in bodies.items()})


@pytest.fixture(scope="module")
def traits() -> ClientTraits:
    return ClientTraits(partition_of=java_partition, idempotent_by_default=False,
                        too_large_error="MessageSizeTooLargeError", sends_null_record=False)
