"""``commitgate produce`` and ``commitgate consume``: records in and out, like kcat, with
kafka-python's producer and consumer (any Kafka-compatible broker).

produce: one record per line of stdin (or ``--value``), with ``--key`` or a key split off each
line at ``--key-delimiter``, headers, a partition and a compression codec. consume: from the
committed offsets of ``--group``, or of the partitions assigned directly from the end (the
default), the beginning, an offset or a time; prints values (text) or one JSON object a line,
and follows new records until ``-n`` records, the end (``--exit-at-end``) or Ctrl-C."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from enum import Enum
from typing import Annotated

import typer
from rich.console import Console

from commitgate.cli.common import (
    CLIENT_ID,
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    fail,
    kafka_errors,
    key_value,
    print_json,
)
from commitgate.gateway.admin.query import parse_time, record_json

POLL_MS = 500


class Compression(str, Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class Format(str, Enum):
    text = "text"
    json = "json"


def produce(
    topic: str,
    value: Annotated[str | None, typer.Option(help="one record with this value (else one a "
                                                   "line of stdin)")] = None,
    key: Annotated[str | None, typer.Option(help="the key of every record")] = None,
    key_delimiter: Annotated[str | None, typer.Option(
        "--key-delimiter", "-K", help="split each line into key and value at this text")] = None,
    header: Annotated[list[str], typer.Option("--header", "-H", help="K=V, may repeat")
                      ] = [],  # noqa: B006
    partition: Annotated[int | None, typer.Option("--partition", "-p", min=0)] = None,
    compression: Compression = Compression.none,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    from kafka import KafkaProducer

    if key is not None and key_delimiter is not None:
        raise typer.BadParameter("--key and --key-delimiter do not go together")
    headers = [(k, v.encode()) for k, v in (key_value(h, "--header") for h in header)]
    lines = [value] if value is not None else (line.rstrip("\n") for line in sys.stdin)
    failures: list[Exception] = []
    with kafka_errors():
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=CLIENT_ID, acks="all",
                                 compression_type=None if compression is Compression.none
                                 else compression.value, linger_ms=5)
        try:
            sent = 0
            for record_key, record_value in _split(lines, key, key_delimiter):
                producer.send(topic, record_value, key=record_key, headers=headers,
                              partition=partition).add_errback(failures.append)
                sent += 1
            producer.flush()
        finally:
            producer.close()
    if failures:
        fail(f"{len(failures)} of {sent} records not produced to {topic}: {failures[0]}")
    Console(stderr=True).print(f"produced {sent} records to {topic}")


def _split(lines, key: str | None, delimiter: str | None
           ) -> Iterator[tuple[bytes | None, bytes]]:
    fixed = None if key is None else key.encode()
    for line in lines:
        if delimiter is None:
            yield fixed, line.encode()
            continue
        record_key, sep, record_value = line.partition(delimiter)
        yield (record_key.encode(), record_value.encode()) if sep else (None, line.encode())


def consume(
    topic: str,
    from_beginning: Annotated[bool, typer.Option("--from-beginning")] = False,
    offset: Annotated[int | None, typer.Option(min=0, help="start here (in each partition)")
                      ] = None,
    at: Annotated[str | None, typer.Option("--time", help="start at the first record at or "
                                                          "after (ms, ISO 8601, -15m)")] = None,
    partition: Annotated[list[int], typer.Option("--partition", "-p", help="may repeat; "
                                                 "default: all")] = [],  # noqa: B006
    group: Annotated[str | None, typer.Option(help="consume as this group (commits its "
                                                   "offsets)")] = None,
    count: Annotated[int | None, typer.Option("-n", "--count", min=1, help="stop after N "
                                              "records")] = None,
    exit_at_end: Annotated[bool, typer.Option("--exit-at-end", "-e", help="stop at the end "
                                              "of the partitions")] = False,
    fmt: Annotated[Format, typer.Option("--format")] = Format.text,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    starts = [offset is not None, at is not None, from_beginning]
    if sum(starts) > 1:
        raise typer.BadParameter("give one of --from-beginning, --offset and --time")
    if group is not None and (partition or offset is not None or at is not None):
        raise typer.BadParameter("--group takes the group's offsets: no --partition, --offset "
                                 "or --time")
    timestamp = _time(at)
    with kafka_errors():
        consumer = _consumer(topic, bootstrap, group, from_beginning)
        try:
            if group is None:
                _assign(consumer, topic, partition, from_beginning, offset, timestamp)
            _follow(consumer, count, exit_at_end, fmt)
        except KeyboardInterrupt:
            pass
        finally:
            consumer.close()


def _time(text: str | None) -> int | None:
    try:
        return None if text is None else parse_time(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _consumer(topic: str, bootstrap: str, group: str | None, from_beginning: bool):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=CLIENT_ID, group_id=group,
                             enable_auto_commit=group is not None,
                             auto_offset_reset="earliest" if from_beginning else "latest")
    if group is not None:
        consumer.subscribe([topic])
    return consumer


def _assign(consumer, topic: str, partitions: list[int], from_beginning: bool,
            offset: int | None, timestamp: int | None) -> None:
    from kafka import TopicPartition

    known = consumer.partitions_for_topic(topic)
    if not known:
        fail(f"unknown topic {topic}")
    missing = sorted(set(partitions) - known)
    if missing:
        fail(f"{topic} has no partition {', '.join(map(str, missing))} "
             f"(it has {len(known)})")
    tps = [TopicPartition(topic, p) for p in sorted(partitions or known)]
    consumer.assign(tps)
    if from_beginning:
        consumer.seek_to_beginning(*tps)
    elif offset is not None:
        for tp in tps:
            consumer.seek(tp, offset)
    elif timestamp is not None:
        found = consumer.offsets_for_times({tp: timestamp for tp in tps})
        ends = consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, found[tp].offset if found.get(tp) else ends[tp])
    else:
        consumer.seek_to_end(*tps)


def _follow(consumer, count: int | None, exit_at_end: bool, fmt: Format) -> None:
    """Print records until ``count``, the end when ``exit_at_end``, or Ctrl-C."""
    printed = 0
    while count is None or printed < count:
        polled = consumer.poll(timeout_ms=POLL_MS, max_records=None if count is None
                               else count - printed)
        for records in polled.values():
            for record in records:
                _print(record, fmt)
            printed += len(records)
        sys.stdout.flush()
        if exit_at_end and not polled and _at_end(consumer):
            return


def _at_end(consumer) -> bool:
    assigned = consumer.assignment()
    if not assigned:
        return False
    ends = consumer.end_offsets(list(assigned))
    return all(consumer.position(tp) >= ends[tp] for tp in assigned)


def _print(record, fmt: Format) -> None:
    if fmt is Format.json:
        print_json({"topic": record.topic} | record_json(
            record.partition, record.offset, record.timestamp, record.key, record.value,
            record.headers))
    else:
        sys.stdout.write((record.value or b"").decode(errors="replace") + "\n")
