"""kafka-python clients opened with the user's kafka.* options; errors name the options."""
from __future__ import annotations

from typing import TypeVar

from kafka.errors import KafkaError

from pipeline.options import OptionError

Client = TypeVar("Client")


def open_client(cls: type[Client], bootstrap: str, settings: dict[str, object]) -> Client:
    try:
        return cls(bootstrap_servers=bootstrap, **settings)
    except (KafkaError, TypeError, ValueError) as exc:
        # unreachable brokers, unknown or mistyped kafka.* settings
        raise OptionError(f"cannot open a Kafka {cls.__name__} on 'kafka.bootstrap.servers' = "
                          f"{bootstrap!r} with the given kafka.* options: {exc}") from None
