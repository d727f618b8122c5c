"""Relocation crash driver: appends while the CommitLog cleaner relocates, until SIGKILLed.

Run as ``python -m tests.engine.relocation_writer DATA_DIR SEED`` (cwd = the project root). It
opens a SYNC_FLUSH store with small CommitLog segments and ConsumeQueue files and a retention
pass every RETENTION_CHECK_MS, creates topics ``keep`` and ``churn`` (both ``retention.ms=-1``)
if missing, prints what recovery left, then keeps IN_FLIGHT appends going forever. Every
DELETE_EVERY acknowledged ``churn`` batches it deletes all of ``churn`` (DeleteRecords to the
log end), so the oldest segments are mostly garbage and the cleaner keeps copying ``keep``'s
batches (which never expire) to the head of the CommitLog, repointing their units and deleting
the old segments. Lines, each written whole and flushed:

    OPEN <topic> <partition> <log start offset> <log end offset>   after the store opened
    ACK <topic> <partition> <base offset> <records> <body bytes> <sha256 of the stored body>
    DEL <partition> <churn log start offset>    delete_records returned (the table is saved)
    RELOC_BEGIN <segment start>     the cleaner starts relocating the oldest segment
    RELOC_END <1|0>                 ... and is done (1: every live entry moved)
    STATS <relocated entries> <relocated bytes> <deleted segments> <CommitLog segments>

STATS comes from a task polling the cleaner's counters every millisecond, so it is printed
while the cleaner waits for a sync: after units were repointed and before their files are
synced or the old segment is deleted. The parent kills on such lines to land its SIGKILL
inside a relocation. ACK lines follow ``wait_durable``; the body is hashed after ``append``
wrote the base offset into it, so the hash is of exactly the bytes the store holds.

``tests.engine.test_relocation_crash`` imports the config and the constants from here so that
the driver and the checker cannot disagree about them.
"""
from __future__ import annotations

import asyncio
import itertools
import random
import sys
import time
from pathlib import Path

from commitgate.engine import MessageStore, StoreConfig, StoreStatus
from commitgate.protocol.record_batch import KafkaBodyFormat
from tests.engine import crash_writer
from tests.engine.crash_writer import emit

KEEP, CHURN = "keep", "churn"
PARTITIONS = {KEEP: 3, CHURN: 2}
TOPIC_CONFIGS = {"retention.ms": "-1"}
SEGMENT_BYTES = 256 * 1024
CQ_ENTRIES_PER_FILE = 100  # repoints and rebuilds cross ConsumeQueue files
IN_FLIGHT = 8
KEEP_SHARE = 0.35  # of the batches; their bytes are a few percent of what is written
DELETE_EVERY = 16  # acknowledged churn batches between two DeleteRecords of all of churn
RETENTION_CHECK_MS = 20
STATS_POLL_S = 0.001


def store_config(data_dir: Path, *, retention_check_interval_ms: int = RETENTION_CHECK_MS
                 ) -> StoreConfig:
    """The store settings of both the driver and the checker (which passes a long interval:
    its checks must see the store as recovery left it): crash_writer's, with these."""
    return crash_writer.store_config(
        data_dir,
        commitlog_segment_bytes=SEGMENT_BYTES,
        consumequeue_entries_per_file=CQ_ENTRIES_PER_FILE,
        retention_check_interval_ms=retention_check_interval_ms,
        cleaner_io_max_bytes_per_second=1 << 30,
    )


def batch_spec(seed: int, counter: int) -> tuple[str, int, list[tuple[bytes | None, bytes, list,
                                                                        int]]]:
    """(topic, partition, records) of batch number ``counter``: ``keep`` batches are small (many
    entries per segment for the cleaner to walk and copy), ``churn`` batches are big."""
    rng = random.Random(f"{seed}:{counter}")
    if rng.random() < KEEP_SHARE:
        topic, count, value_size = KEEP, rng.randint(1, 5), (20, 200)
    else:
        topic, count = CHURN, rng.randint(1, 10)
        value_size = (max(1, 2_000 // count), max(1, 16_000 // count))
    partition = rng.randrange(PARTITIONS[topic])
    now = int(time.time() * 1000)
    records = []
    for i in range(count):
        key = f"{topic}-{seed}-{counter}-{i}".encode() if rng.random() < 0.5 else None
        records.append((key, rng.randbytes(rng.randint(*value_size)), [], now + i))
    return topic, partition, records


class Driver:
    """Drives the store from IN_FLIGHT append slots; ``compaction_writer`` extends it."""

    name = "relocation_writer"  # the module, in usage and failure messages

    def __init__(self, store: MessageStore, seed: int) -> None:
        self.store = store
        self.seed = seed
        self.counter = itertools.count()
        self.churn_acks = 0

    async def append_forever(self) -> None:
        """One in-flight slot: append, wait until durable, print the ACK, repeat."""
        store = self.store
        while True:
            topic, partition, records = batch_spec(self.seed, next(self.counter))
            result, body, digest = await crash_writer.append_durably(
                store, topic, partition, records, self.name)
            emit(f"ACK {topic} {partition} {result.base_offset} {len(records)} {len(body)} "
                 f"{digest}")
            if topic == CHURN:
                self.churn_acked()

    def fail(self, message: str) -> None:
        crash_writer.fail(message, self.name)

    def churn_acked(self) -> None:
        """Every DELETE_EVERY acknowledged churn batches, all of churn is deleted."""
        self.churn_acks += 1
        if self.churn_acks % DELETE_EVERY == 0:
            self.delete_churn()

    def delete_churn(self) -> None:
        for partition in range(PARTITIONS[CHURN]):
            status, start = self.store.delete_records(CHURN, partition, -1)
            if status is not StoreStatus.OK:
                self.fail(f"delete_records({CHURN}-{partition}) returned {status}")
            emit(f"DEL {partition} {start}")

    def counters(self) -> tuple[int, ...]:
        """What STATS lines print: the cleaner's counters and the CommitLog's segments."""
        stats = self.store.retention.cleaner.stats
        return (stats.relocated_entries, stats.relocated_bytes, stats.deleted_segments,
                len(self.store.commit_log.queue.files))

    async def report_stats(self) -> None:
        """Print the counters whenever they change."""
        last = None
        while True:
            now = self.counters()
            if now != last:
                emit("STATS " + " ".join(map(str, now)))
                last = now
            await asyncio.sleep(STATS_POLL_S)

    def trace_relocation(self) -> None:
        """Print a line before and after each relocation of the oldest segment (observation
        only: the cleaner's own method does the work)."""
        cleaner = self.store.retention.cleaner
        relocate = getattr(cleaner, "_relocate", None)
        if relocate is None:  # renamed: the parent's kill modes fall back to other lines
            return

        async def traced(mapped):
            emit(f"RELOC_BEGIN {mapped.start_offset}")
            moved = await relocate(mapped)
            emit(f"RELOC_END {int(moved)}")
            return moved

        cleaner._relocate = traced

    def trace(self) -> None:
        """Install the driver's traces (before any topic is made)."""
        self.trace_relocation()


async def drive(driver_class: type[Driver], data_dir: Path, seed: int,
                topics: dict[str, tuple[int, dict[str, str]]]) -> None:
    """Open the store, make ``topics`` ({name: (partitions, configs)}) where a former run did
    not, print what recovery left (OPEN lines), then run ``driver_class``'s append slots and
    its STATS task until killed."""
    store = MessageStore(store_config(data_dir), KafkaBodyFormat())
    await store.open()
    driver = driver_class(store, seed)
    driver.trace()
    for topic, (partitions, configs) in topics.items():
        if store.topic(topic) is None:
            result = store.create_topic(topic, partitions, configs)
            if result.status is not StoreStatus.OK:
                driver.fail(f"create_topic({topic}) returned {result}")
        for partition in range(partitions):
            emit(f"OPEN {topic} {partition} {store.log_start_offset(topic, partition)} "
                 f"{store.log_end_offset(topic, partition)}")
    await asyncio.gather(driver.report_stats(),
                         *(driver.append_forever() for _ in range(IN_FLIGHT)))


async def run(data_dir: Path, seed: int) -> None:
    await drive(Driver, data_dir, seed,
                {topic: (partitions, TOPIC_CONFIGS) for topic, partitions in PARTITIONS.items()})


def main(argv: list[str]) -> None:
    crash_writer.run_from_command_line(argv, Driver.name, run)


if __name__ == "__main__":
    main(sys.argv)
