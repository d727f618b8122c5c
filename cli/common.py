"""What the network commands share: ``--bootstrap``, kafka-python clients that fail with a
message rather than a traceback, and output (rich tables, or JSON on stdout)."""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

DEFAULT_BOOTSTRAP = "localhost:9092"
CLIENT_ID = "commitgate-cli"
Bootstrap = Annotated[str, typer.Option(help="a broker's host:port (any Kafka-compatible broker)")]
AsJson = Annotated[bool, typer.Option("--json", help="JSON on stdout instead of tables")]


def fail(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]error:[/] {escape(message)}")
    raise typer.Exit(1)


@contextmanager
def kafka_errors() -> Iterator[None]:
    """A Kafka error (an unreachable broker, an error code) ends the command with its text."""
    from kafka.errors import BrokerResponseError, KafkaError

    try:
        yield
    except BrokerResponseError as exc:  # its text repeats the whole request and response
        fail(f"{type(exc).__name__}: {exc.description}")
    except KafkaError as exc:
        fail(str(exc) or type(exc).__name__)


def check_results(results: list[dict]) -> None:
    """Fail with the broker's message for the first result (per topic, per group) that carries
    an error code."""
    from kafka.errors import for_code

    for result in results:
        if result["error_code"]:
            error = for_code(result["error_code"])
            fail(f"{result['name']}: {result.get('error_message') or error.description} "
                 f"({error.__name__})")


@contextmanager
def admin_client(bootstrap: str):
    from kafka import KafkaAdminClient

    with kafka_errors():
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID)
        try:
            yield admin
        finally:
            admin.close()


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data) + "\n")


def show_time(ms: int) -> str:
    """A record timestamp for a table: local ISO time to the millisecond (-1: none)."""
    return "-" if ms < 0 else datetime.fromtimestamp(ms / 1000).isoformat(timespec="milliseconds")


def key_value(text: str, what: str) -> tuple[str, str]:
    """``KEY=VALUE`` as given to --config or --header."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"{what} takes KEY=VALUE, got {text!r}")
    return key, value
