"""Produce validation benchmark: ``python -m commitgate.bench.validation`` (or ``commitgate bench
validation``).

For batches of 1 KiB records (text-like values that compress about 3:1), uncompressed, lz4 and
zstd, holding 16 KiB, 64 KiB and 1 MiB of records, prints in one run:

- the validator alone, MB/s of produced (wire) bytes: the header-and-CRC check that produce
  did before (``record_batch._check_batch``, which is also the first step of the full one)
  beside the full validation (``validate_record_set``: every record walked in C, compressed
  batches decompressed in bounded pieces);
- the produce handler's path, validation then ``MessageStore.append`` into a store in a
  temporary directory (ASYNC_FLUSH), with each validation in alternating rounds, the full one
  also without handing the keys to the IndexBuilder; two windows from the first append: until
  the ConsumeQueue units are drained ("appended"), and until the IndexBuilder has indexed it
  all ("indexed": the builder lags behind fast appends, and a round must not leave its work to
  the next); the ratios are over header-and-CRC, the median of the rounds' own ratios;
- through brokers (``--broker``): a confluent-kafka producer (librdkafka, acks=1, 1 KiB
  values) sending to a CommitGate broker subprocess with the full validation and to one whose
  produce handler has the header-and-CRC check instead, in alternating rounds, for librdkafka
  batch.size 64 KiB and 1 MB (of records, before compression).

Both paths pay the store's own work, including the IndexBuilder thread, which competes for the
GIL. With the full validation a compressed batch's keys come from it (as produce hands them
over); after the header-and-CRC check, or without the handoff, the IndexBuilder decompresses
the batch for them. Every record has a key here, and the builder's work for each key bounds
the "indexed" figures. On a loaded machine the store figures swing widely from round to
round, hence the median of per-round ratios.

Figures, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from commitgate.engine import MessageStore, StoreConfig, StoreStatus
from commitgate.launcher import BrokerProcess
from commitgate.protocol import record_batch
from commitgate.protocol.record_batch import (
    BASE_OFFSET,
    KafkaBodyFormat,
    RecordRules,
    RecordSetCheck,
    RecordSetStatus,
    build_batch,
    read_header,
    validate_record_set,
)

KIB, MIB = 1 << 10, 1 << 20
RECORD_BYTES = KIB
CODECS = ("none", "lz4", "zstd")
BATCH_SIZES = (16 * KIB, 64 * KIB, MIB)
MAX_MESSAGE_BYTES = 2 * MIB
RULES = RecordRules(timestamps=(0, 2 ** 62))  # a CreateTime topic with a time range to check
VALIDATOR_SECONDS = 0.3
YIELD_EVERY_BYTES = MIB  # give the loop's flush tasks a turn, as a server between requests
WORDS = [f"{word}{n}" for word in ("user", "order", "event", "item", "price", "status", "click",
                                   "session", "page", "region") for n in range(60)]

Validator = Callable[[memoryview, int], list[bytes] | None]  # (batch, key budget) -> keys


def headers_only(view: memoryview, _key_budget: int = 0) -> None:
    """What produce checked before: header fields and CRC-32C."""
    record_batch._check_batch(view, 0, len(view), MAX_MESSAGE_BYTES)


def full(view: memoryview, key_budget: int = 0) -> list[bytes] | None:
    """validate_record_set as produce calls it: a compressed batch's keys come back for the
    IndexBuilder when the store has room for them."""
    check = validate_record_set(view, MAX_MESSAGE_BYTES, RULES, key_budget)
    if check.status is not RecordSetStatus.OK:
        raise RuntimeError("the benchmark's batch does not validate")
    return check.keys


def full_without_handoff(view: memoryview, _key_budget: int = 0) -> None:
    """The full validation, its keys not handed over: the IndexBuilder decompresses."""
    full(view)


VALIDATORS: dict[str, Validator] = {"header+CRC": headers_only, "full": full}
PATHS: dict[str, Validator] = {**VALIDATORS, "full, no handoff": full_without_handoff}


def make_batch(codec: str, records_bytes: int, rng: random.Random) -> bytearray:
    """Records of about RECORD_BYTES each (JSON-like text), ``records_bytes`` of them."""
    now = int(time.time() * 1000)
    specs = []
    for i in range(max(1, records_bytes // RECORD_BYTES)):
        text = " ".join(rng.choice(WORDS) for _ in range(RECORD_BYTES // 8))
        value = f'{{"id": {i}, "text": "{text}"}}'.encode()[:RECORD_BYTES - 40]
        specs.append((b"key-%d" % rng.randrange(1000), value, [("source", b"bench")], now + i))
    return bytearray(build_batch(specs, compression=codec))


def validator_mb_per_s(validate: Validator, view: memoryview) -> float:
    runs, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < VALIDATOR_SECONDS:
        validate(view, 0)
        runs += 1
    return runs * len(view) / elapsed / 1e6


WINDOWS = ("appended", "indexed")


async def produce_mb_per_s(store: MessageStore, validate: Validator, view: memoryview,
                           volume: int) -> dict[str, float]:
    """Validate then append ``view`` until ``volume`` wire bytes went in; MB/s by window."""
    count = read_header(view).record_count
    appends, since_yield = max(1, volume // len(view)), 0
    started = time.perf_counter()
    for _ in range(appends):
        BASE_OFFSET.pack_into(view, 0, 0)  # as a producer sends it; the append assigned one
        keys = validate(view, store.key_room)
        result = store.append("bench", 0, view, offset_count=count, max_timestamp=0, keys=keys)
        if result.status is not StoreStatus.OK:
            raise RuntimeError(f"append failed: {result}")
        since_yield += len(view)
        if since_yield >= YIELD_EVERY_BYTES:
            since_yield = 0
            await asyncio.sleep(0)
    store.queues.drain()
    appended = time.perf_counter()
    while store.index.indexed < store.dispatcher.dispatched_offset:
        await store.index.catch_up(store.dispatcher.dispatched_offset)
    indexed = time.perf_counter()
    return {window: appends * len(view) / (end - started) / 1e6
            for window, end in zip(WINDOWS, (appended, indexed))}


@dataclass
class Row:
    codec: str
    records_bytes: int
    wire_bytes: int
    validator: dict[str, float]
    produce: dict[tuple[str, str], float]  # (path, window): median MB/s
    ratios: dict[tuple[str, str], float]  # full paths: median of the rounds' full / header+CRC


async def measure(codec: str, records_bytes: int, volume: int, rounds: int,
                  directory: Path) -> Row:
    view = memoryview(make_batch(codec, records_bytes, random.Random(records_bytes)))
    validator = {name: validator_mb_per_s(fn, view) for name, fn in VALIDATORS.items()}
    store = MessageStore(StoreConfig(data_dir=directory / f"{codec}-{records_bytes}"),
                         KafkaBodyFormat())
    await store.open()
    try:
        store.create_topic("bench", 1)
        await produce_mb_per_s(store, headers_only, view, 4 * MIB)  # warm the files up
        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for name, fn in PATHS.items():
                figures = await produce_mb_per_s(store, fn, view, volume)
                for window, figure in figures.items():
                    samples.setdefault((name, window), []).append(figure)
    finally:
        await store.close()
    ratios = {(name, window): statistics.median(
        f / h for f, h in zip(samples[name, window], samples["header+CRC", window]))
        for name in PATHS if name != "header+CRC" for window in WINDOWS}
    return Row(codec, records_bytes, len(view), validator,
               {name: statistics.median(values) for name, values in samples.items()}, ratios)


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB else f"{n // KIB} KiB"


def report(rows: list[Row], volume: int, rounds: int) -> None:
    table = Table(title=f"Produce validation, MB/s of produced bytes ({rounds} rounds of "
                        f"{volume // MIB} MiB per path; 1 KiB records)")
    for column in ("codec", "records / wire", "validator header+CRC", "validator full",
                   *(f"produce {name} (appended / indexed)" for name in PATHS),
                   "kept", "kept, no handoff"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row.codec, f"{_size(row.records_bytes)} / {row.wire_bytes // KIB} KiB",
                      f"{row.validator['header+CRC']:,.0f}", f"{row.validator['full']:,.0f}",
                      *(" / ".join(f"{row.produce[name, w]:,.0f}" for w in WINDOWS)
                        for name in PATHS),
                      *(" / ".join(f"{row.ratios[name, w]:.0%}" for w in WINDOWS)
                        for name in ("full", "full, no handoff")))
    Console(width=160).print(table)  # nine columns


# ---- through brokers ---------------------------------------------------------------------

PRODUCER_BATCH_SIZES = (64 * KIB, 1_000_000)


def headers_only_check(buf, max_batch_bytes: int, _rules: RecordRules | None = None,
                       _key_budget: int = 0) -> RecordSetCheck:
    """validate_record_set as produce had it before: one batch, header and CRC only."""
    view = memoryview(buf)
    try:
        header = record_batch._check_batch(view, 0, len(view), max_batch_bytes)
    except record_batch._Refused as refused:
        return RecordSetCheck(refused.status, [], refused.detail)
    return RecordSetCheck(RecordSetStatus.OK, [header], newest=[header.max_timestamp])


def serve(header_only: bool, overrides: list[str]) -> None:
    """A broker process (``python -m commitgate.bench.validation serve``), its produce handler's
    validation swapped for the old one when ``header_only``."""
    from commitgate.gateway import produce_path, settings
    from commitgate.gateway.server import configure_logging, run_loop, run_until_signal

    configure_logging("warning")
    if header_only:
        produce_path.validate_record_set = headers_only_check
    run_loop(run_until_signal(settings.load(None, overrides)))


class BenchBroker(BrokerProcess):
    def __init__(self, data_dir: Path, header_only: bool) -> None:
        super().__init__(data_dir, {"num.partitions": "1"})
        self.header_only = header_only

    def command(self) -> list[str]:
        args = super().command()
        serve_args = args[args.index("serve") + 1:]
        return [sys.executable, "-m", "commitgate.bench.validation", "serve",
                *(["--header-only"] if self.header_only else []), *serve_args]


def produce_through(bootstrap: str, topic: str, codec: str, batch_size: int,
                    volume: int) -> float:
    """MB/s of record values a confluent-kafka producer gets acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 5, "batch.size": batch_size, "acks": 1,
                         "queue.buffering.max.kbytes": 262_144})
    rng = random.Random(7)
    values = [" ".join(rng.choice(WORDS) for _ in range(RECORD_BYTES // 8)).encode()
              [:RECORD_BYTES] for _ in range(64)]
    failures: list[object] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    count = volume // RECORD_BYTES
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % len(values)], on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) or failures:
        raise RuntimeError(f"produce to {topic} failed: {failures[:3]}")
    return count * RECORD_BYTES / (time.perf_counter() - started) / 1e6


def brokers(volume_mb: int, rounds: int) -> list[tuple[str, int, dict[str, float], float]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-validation-") as tmp:
        runs = {"header+CRC": BenchBroker(Path(tmp) / "headers", True),
                "full": BenchBroker(Path(tmp) / "full", False)}
        for broker in runs.values():
            broker.start()
        try:
            for codec in CODECS:
                for batch_size in PRODUCER_BATCH_SIZES:
                    topic = f"bench-{codec}-{batch_size}"
                    samples: dict[str, list[float]] = {name: [] for name in runs}
                    for _ in range(rounds):
                        for name, broker in runs.items():
                            samples[name].append(produce_through(
                                broker.bootstrap, topic, codec, batch_size, volume_mb * MIB))
                    ratios = [f / h for f, h in zip(samples["full"], samples["header+CRC"])]
                    rows.append((codec, batch_size, {n: statistics.median(v)
                                                     for n, v in samples.items()},
                                 statistics.median(ratios)))
        finally:
            for broker in runs.values():
                broker.stop()
    table = Table(title=f"Through a broker: confluent-kafka acks=1, MB/s of 1 KiB values "
                        f"({rounds} rounds of {volume_mb} MiB per broker)")
    for column in ("codec", "batch.size", "header+CRC broker", "full broker", "kept"):
        table.add_column(column, justify="right")
    for codec, batch_size, medians, ratio in rows:
        table.add_row(codec, f"{batch_size:,}", f"{medians['header+CRC']:,.0f}",
                      f"{medians['full']:,.0f}", f"{ratio:.0%}")
    Console().print(table)
    return rows


def main(volume_mb: int = 256, rounds: int = 3) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-validation-") as tmp:
        for codec in CODECS:
            for records_bytes in BATCH_SIZES:
                rows.append(asyncio.run(measure(codec, records_bytes, volume_mb * MIB, rounds,
                                                Path(tmp))))
    report(rows, volume_mb * MIB, rounds)
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:  # a broker for brokers(): serve [--header-only] --override..
        header_only = "--header-only" in sys.argv
        serve(header_only, [a for a in sys.argv[2:] if a not in ("--header-only", "--override")])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volume-mb", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", action="store_true", help="also through brokers")
    parser.add_argument("--broker-volume-mb", type=int, default=128)
    args = parser.parse_args()
    main(args.volume_mb, args.rounds)
    if args.broker:
        brokers(args.broker_volume_mb, args.rounds)
