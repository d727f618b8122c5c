"""Kafka clients opened with the user's kafka.* options; errors name the options.

kafka-python plans reads on the driver and writes; confluent-kafka (librdkafka) reads on the
executors, where its C record decoding keeps the per-record cost out of Python.
"""
from __future__ import annotations

from typing import TypeVar

import confluent_kafka
from kafka.errors import KafkaError

from commitgate.pipeline.options import OptionError

Client = TypeVar("Client")


def open_client(cls: type[Client], bootstrap: str, settings: dict[str, object]) -> Client:
    try:
        return cls(bootstrap_servers=bootstrap, **settings)
    except (KafkaError, TypeError, ValueError) as exc:
        # unreachable brokers, unknown or mistyped kafka.* settings
        raise OptionError(_cannot_open(cls.__name__, bootstrap, exc)) from None


def open_reader(settings: dict[str, object]) -> confluent_kafka.Consumer:
    """A librdkafka consumer; it connects in the background, so only settings can fail here."""
    try:
        return confluent_kafka.Consumer(settings)
    except (confluent_kafka.KafkaException, TypeError, ValueError) as exc:
        # an unknown setting or a bad value; KafkaException wraps a KafkaError with the text
        reason = exc.args[0].str() if isinstance(exc, confluent_kafka.KafkaException) else exc
        raise OptionError(_cannot_open("Consumer", settings["bootstrap.servers"], reason)) \
            from None


def _cannot_open(kind: str, bootstrap: object, reason: object) -> str:
    return (f"cannot open a Kafka {kind} on 'kafka.bootstrap.servers' = {bootstrap!r} with the "
            f"given kafka.* options: {reason}")
