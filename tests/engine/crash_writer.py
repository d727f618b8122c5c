"""Crash-test writer: appends to a SYNC_FLUSH store until it is SIGKILLed.

Run as ``python -m tests.engine.crash_writer DATA_DIR SEED`` (cwd = the project root). It opens
the store with small CommitLog segments and ConsumeQueue files so that rolls happen within a
second, creates topic ``crash`` if missing, prints ``OPEN <partition> <log end offset>`` for
every partition (what recovery left), then keeps ``IN_FLIGHT`` appends going forever. After
each acknowledgement (``wait_durable`` returned OK) it prints one line, flushed:

    ACK <partition> <base_offset> <record_count> <sha256 of the stored body>

The body is hashed after ``append`` wrote the base offset into it, so the hash is of exactly
the bytes the store holds. Batch shapes come from SEED and a counter; timestamps are wall-clock
so that time-based retention never treats the batches as old.

``tests.engine.test_crash_recovery`` imports the config and the batch-header helpers from here
so that the writer and the checker cannot disagree about them.
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from commitgate.engine import AppendResult, MessageStore, StoreConfig, StoreStatus
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch

TOPIC = "crash"
PARTITIONS = 4
IN_FLIGHT = 16
SEGMENT_BYTES = 256 * 1024
CQ_ENTRIES_PER_FILE = 1000
MAX_RECORDS = 20

# Kafka RecordBatch v2 header: baseOffset at 0, recordsCount at 57 (both big-endian).
BASE_OFFSET = struct.Struct(">q")
RECORDS_COUNT = struct.Struct(">i")
RECORDS_COUNT_AT = 57


def store_config(data_dir: Path, **overrides) -> StoreConfig:
    """The store settings of both the writer and the checker (the other crash drivers' with
    their ``overrides``)."""
    settings = {
        "commitlog_segment_bytes": SEGMENT_BYTES,
        "consumequeue_entries_per_file": CQ_ENTRIES_PER_FILE,
        "flush_disk_type": "SYNC_FLUSH",
        # The defaults would fallocate a 420 MB IndexFile; small ones also make the index roll.
        "index_hash_slots": 1024,
        "index_max_entries": 4096,
    }
    return StoreConfig(data_dir=data_dir, **{**settings, **overrides})


def batch_header(body: memoryview | bytes) -> tuple[int, int]:
    """(base offset, record count) read from a stored Kafka batch."""
    return BASE_OFFSET.unpack_from(body, 0)[0], RECORDS_COUNT.unpack_from(body, RECORDS_COUNT_AT)[0]


def batch_spec(seed: int, counter: int) -> tuple[int, list[tuple[bytes | None, bytes, list, int]]]:
    """(partition, records) of batch number ``counter``: mostly small, some up to ~50 KiB."""
    rng = random.Random(f"{seed}:{counter}")
    partition = rng.randrange(PARTITIONS)
    count = rng.randint(1, MAX_RECORDS)
    kind = rng.random()
    if kind < 0.05:
        total = rng.randint(20_000, 50_000)
    elif kind < 0.30:
        total = rng.randint(1_000, 8_000)
    else:
        total = rng.randint(count, 1_000)
    size = max(1, total // count)
    now = int(time.time() * 1000)
    records = []
    for i in range(count):
        key = f"k{seed}-{counter}-{i}".encode() if rng.random() < 0.5 else None
        records.append((key, rng.randbytes(rng.randint(max(1, size // 2), size)), [], now + i))
    return partition, records


async def append_durably(store: MessageStore, topic: str, partition: int, records: list,
                         writer: str = "crash_writer") -> tuple[AppendResult, bytearray, str]:
    """Append one batch and wait until it is durable: (result, stored body, its sha256)."""
    body = bytearray(build_batch(records))
    result = store.append(topic, partition, memoryview(body), offset_count=len(records),
                          max_timestamp=max(r[3] for r in records))
    if result.status is not StoreStatus.OK:
        fail(f"append to {topic}-{partition} returned {result}", writer)
    # Hash now: the body is ours and the store has just written the base offset into it.
    digest = hashlib.sha256(body).hexdigest()
    status = await store.wait_durable(result.phy_end)
    if status is not StoreStatus.OK:
        fail(f"wait_durable({result.phy_end}) returned {status}", writer)
    return result, body, digest


async def append_forever(store: MessageStore, seed: int, counter: itertools.count) -> None:
    """One in-flight slot: append, wait until durable, print the ACK, repeat."""
    while True:
        partition, records = batch_spec(seed, next(counter))
        result, _, digest = await append_durably(store, TOPIC, partition, records)
        emit(f"ACK {partition} {result.base_offset} {len(records)} {digest}")


def emit(line: str) -> None:
    """One line per write: a line under PIPE_BUF reaches the pipe whole or not at all."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(message: str, writer: str = "crash_writer") -> None:
    sys.stderr.write(f"{writer}: {message}\n")
    sys.stderr.flush()
    raise SystemExit(3)


async def run(data_dir: Path, seed: int) -> None:
    store = MessageStore(store_config(data_dir), KafkaBodyFormat())
    await store.open()
    if store.topic(TOPIC) is None:
        result = store.create_topic(TOPIC, PARTITIONS)
        if result.status is not StoreStatus.OK:
            fail(f"create_topic returned {result}")
    for partition in range(PARTITIONS):
        emit(f"OPEN {partition} {store.log_end_offset(TOPIC, partition)}")
    counter = itertools.count()
    await asyncio.gather(*(append_forever(store, seed, counter) for _ in range(IN_FLIGHT)))


def run_from_command_line(argv: list[str], writer: str,
                          drive: Callable[[Path, int], Awaitable[None]]) -> None:
    """``python -m tests.engine.<writer> DATA_DIR SEED``: runs ``drive(DATA_DIR, SEED)`` (until
    the parent kills it)."""
    if len(argv) != 3:
        fail(f"usage: python -m tests.engine.{writer} DATA_DIR SEED", writer)
    asyncio.run(drive(Path(argv[1]), int(argv[2])))


def main(argv: list[str]) -> None:
    run_from_command_line(argv, "crash_writer", run)


if __name__ == "__main__":
    main(sys.argv)
