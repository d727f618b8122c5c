"""Each Python client's settings for a security protocol, and a produce-then-read round trip
with it: the test fails with the client's own error."""
from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer
from kafka import KafkaConsumer, KafkaProducer

TIMEOUT_S = 30
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")


@dataclass
class Login:
    protocol: str  # the listener's security protocol
    mechanism: str | None = None
    user: str = ""
    password: str = ""
    ca_file: Path | None = None
    cert_file: Path | None = None  # a client certificate (mutual TLS)
    key_file: Path | None = None


def confluent_settings(bootstrap: str, login: Login) -> dict:
    settings = {"bootstrap.servers": bootstrap, "security.protocol": login.protocol}
    if login.mechanism:
        settings.update({"sasl.mechanism": login.mechanism, "sasl.username": login.user,
                         "sasl.password": login.password})
    if login.ca_file:
        settings["ssl.ca.location"] = str(login.ca_file)
    if login.cert_file:
        settings.update({"ssl.certificate.location": str(login.cert_file),
                         "ssl.key.location": str(login.key_file)})
    return settings


def kafka_python_settings(bootstrap: str, login: Login) -> dict:
    settings = {"bootstrap_servers": bootstrap, "security_protocol": login.protocol}
    if login.mechanism:
        settings.update({"sasl_mechanism": login.mechanism, "sasl_plain_username": login.user,
                         "sasl_plain_password": login.password})
    if login.ca_file:
        settings["ssl_cafile"] = str(login.ca_file)
    if login.cert_file:
        settings.update({"ssl_certfile": str(login.cert_file),
                         "ssl_keyfile": str(login.key_file)})
    return settings


def aiokafka_settings(bootstrap: str, login: Login) -> dict:
    settings = {"bootstrap_servers": bootstrap, "security_protocol": login.protocol}
    if login.mechanism:
        settings.update({"sasl_mechanism": login.mechanism, "sasl_plain_username": login.user,
                         "sasl_plain_password": login.password})
    if login.ca_file:
        settings["ssl_context"] = create_ssl_context(
            cafile=str(login.ca_file), certfile=str(login.cert_file) if login.cert_file else None,
            keyfile=str(login.key_file) if login.key_file else None)
    return settings


def round_trip(client: str, bootstrap: str, login: Login) -> list[bytes]:
    """Produce two records to a new topic and read them back; the values read."""
    topic = f"sec-{client}-{uuid.uuid4().hex[:8]}"
    values = [b"first " + topic.encode(), b"second " + topic.encode()]
    read = {"confluent-kafka": _confluent, "kafka-python": _kafka_python,
            "aiokafka": lambda *a: asyncio.run(_aiokafka(*a))}[client](bootstrap, login, topic,
                                                                          values)
    return read


def _confluent(bootstrap: str, login: Login, topic: str, values: list[bytes]) -> list[bytes]:
    settings = confluent_settings(bootstrap, login)
    errors: list = []
    producer = Producer(settings)
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _: errors.append(err))
    producer.flush(TIMEOUT_S)
    if any(errors) or len(errors) != len(values):
        raise KafkaException(f"delivery: {errors}")
    consumer = Consumer({**settings, "group.id": topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            got.append(message.value())
        return got
    finally:
        consumer.close()


def _kafka_python(bootstrap: str, login: Login, topic: str, values: list[bytes]) -> list[bytes]:
    settings = kafka_python_settings(bootstrap, login)
    producer = KafkaProducer(**settings)
    try:
        for future in [producer.send(topic, value) for value in values]:
            future.get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(topic, **settings, auto_offset_reset="earliest",
                             consumer_timeout_ms=TIMEOUT_S * 1000)
    try:
        got: list[bytes] = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
        return got
    finally:
        consumer.close()


async def _aiokafka(bootstrap: str, login: Login, topic: str,
                    values: list[bytes]) -> list[bytes]:
    settings = aiokafka_settings(bootstrap, login)
    producer = AIOKafkaProducer(**settings)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, **settings, auto_offset_reset="earliest")
    await consumer.start()
    try:
        got: list[bytes] = []
        async with asyncio.timeout(TIMEOUT_S):
            async for message in consumer:
                got.append(message.value)
                if len(got) == len(values):
                    break
        return got
    finally:
        await consumer.stop()
