"""Compaction crash driver: appends keyed records to a compacted topic while the LogCompactor
cleans it and the CommitLog cleaner relocates, until SIGKILLed.

Run as ``python -m tests.engine.compaction_writer DATA_DIR SEED`` (cwd = the project root). It
opens the store of ``tests.engine.relocation_writer`` (SYNC_FLUSH, small CommitLog segments and
ConsumeQueue files, a retention pass every RETENTION_CHECK_MS, so the LogCompactor runs
constantly), creates ``compacted`` (cleanup.policy=compact, a tiny min.cleanable.dirty.ratio,
a delete.retention.ms so large that tombstones stay) and relocation_writer's ``churn`` if
missing, prints what recovery left, then keeps IN_FLIGHT appends going forever. ``compacted``
gets batches of 1-5 records whose keys come from KEY_SPACE keys (some of them tombstones), so
every cleaning removes much; ``churn`` gets big batches and is deleted to its end every
DELETE_EVERY acknowledged churn batches (relocation_writer's Driver.delete_churn), so the oldest
CommitLog segments are mostly garbage and the cleaner relocates the compacted partition's
batches (originals and cleaned copies) again and again. Lines, each written whole and flushed:

    OPEN <topic> <partition> <log start offset> <log end offset>   after the store opened
    SEND <partition> <base offset> <records> <key>=<value digest> ...
                                    before a ``compacted`` append (its base offset is the log
                                    end the store will assign: nothing runs in between), so
                                    every batch the store may hold was announced
    ACK <partition> <base offset> <records>     the SEND batch is durable (wait_durable OK)
    CHURN_ACK <partition> <base offset>         a churn batch is durable
    DEL <partition> <churn log start offset>    delete_records returned (the table is saved)
    CLEAN_BEGIN <partition> <dirty from> <cleanable end>   the compactor starts a cleaning
    APPLY_BEGIN <pointings>         a chunk of cleaned batches was appended: it is about to be
                                    synced and its units pointed at it
    APPLY_END <1|0>                 ... units pointed (their files not synced yet)
    CLEAN_END <1|0>                 the cleaning is done (1: units synced, checkpoint saved)
    RELOC_BEGIN <segment start>     (relocation_writer's trace) the cleaner relocates
    RELOC_END <1|0>
    STATS <rewritten batches> <dropped batches> <cleaned partitions> <relocated entries>
          <deleted segments> <CommitLog segments>

STATS comes from a task polling the counters every STATS_POLL_S, so a growth of the
compactor's counters is printed while the compactor waits for the sync of the chunk it just
wrote (copies appended, units not yet pointed). The parent kills on such lines.

``tests.engine.test_compaction_crash`` imports the topic settings and ``value_digest`` from
here so that the driver and the checker cannot disagree about them.
"""
from __future__ import annotations

import hashlib
import random
import sys
import time
from pathlib import Path

from commitgate.engine import StoreStatus
from commitgate.protocol.record_batch import build_batch
from tests.engine.crash_writer import run_from_command_line
from tests.engine.relocation_writer import (
    CHURN,
    PARTITIONS,
    TOPIC_CONFIGS,
    Driver,
    drive,
    emit,
)

COMPACTED = "compacted"
COMPACTED_PARTITIONS = 2
COMPACT_CONFIGS = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": str(10**15)}
KEY_SPACE = 40  # keys per partition: most records are superseded soon
TOMBSTONE_SHARE = 0.15
COMPACTED_SHARE = 0.5  # of the batches
MAX_RECORDS = 5

Record = tuple[bytes, bytes | None, list, int]  # (key, value or None, headers, timestamp)


def value_digest(value: bytes | None) -> str:
    """What SEND lines carry for a value: '-' for a tombstone."""
    return "-" if value is None else hashlib.sha256(value).hexdigest()[:20]


def batch_spec(seed: int, counter: int) -> tuple[str, int, list[Record]]:
    """(topic, partition, records) of batch number ``counter``."""
    rng = random.Random(f"{seed}:{counter}")
    now = int(time.time() * 1000)
    if rng.random() < COMPACTED_SHARE:
        partition = rng.randrange(COMPACTED_PARTITIONS)
        records = []
        for _ in range(rng.randint(1, MAX_RECORDS)):
            key = f"k{rng.randrange(KEY_SPACE)}".encode()
            value = None if rng.random() < TOMBSTONE_SHARE else rng.randbytes(rng.randint(10, 300))
            records.append((key, value, [], now))
        return COMPACTED, partition, records
    count = rng.randint(1, 10)
    records = [(None, rng.randbytes(rng.randint(max(1, 2_000 // count), 16_000 // count)), [],
                now) for _ in range(count)]
    return CHURN, rng.randrange(PARTITIONS[CHURN]), records


class CompactionDriver(Driver):
    name = "compaction_writer"

    async def append_forever(self) -> None:
        """One in-flight slot: (announce,) append, wait until durable, print the ACK, repeat."""
        store = self.store
        while True:
            topic, partition, records = batch_spec(self.seed, next(self.counter))
            body = bytearray(build_batch(records))
            base = store.log_end_offset(topic, partition)
            if topic == COMPACTED:
                emit(f"SEND {partition} {base} {len(records)} " + " ".join(
                    f"{key.decode()}={value_digest(value)}" for key, value, _, _ in records))
            result = store.append(topic, partition, memoryview(body), offset_count=len(records),
                                  max_timestamp=max(r[3] for r in records))
            if result.status is not StoreStatus.OK or result.base_offset != base:
                self.fail(f"append to {topic}-{partition} (announced at {base}) returned {result}")
            status = await store.wait_durable(result.phy_end)
            if status is not StoreStatus.OK:
                self.fail(f"wait_durable({result.phy_end}) returned {status}")
            if topic == COMPACTED:
                emit(f"ACK {partition} {base} {len(records)}")
                continue
            emit(f"CHURN_ACK {partition} {base}")
            self.churn_acked()

    def counters(self) -> tuple[int, ...]:
        """What STATS lines print: the compactor's counters, then the cleaner's."""
        compactor = self.store.retention.compactor
        stats = self.store.retention.cleaner.stats
        return (compactor.rewritten_batches, compactor.dropped_batches,
                compactor.cleaned_partitions, stats.relocated_entries, stats.deleted_segments,
                len(self.store.commit_log.queue.files))

    def trace_compaction(self) -> None:
        """Print lines around each cleaning and each chunk it applies (observation only: the
        compactor's own methods do the work)."""
        compactor = self.store.retention.compactor
        clean, apply = compactor.clean, getattr(compactor, "_apply", None)

        async def traced_clean(topic, partition, dirty_from, end, now_ms):
            emit(f"CLEAN_BEGIN {partition} {dirty_from} {end}")
            done = await clean(topic, partition, dirty_from, end, now_ms)
            emit(f"CLEAN_END {int(done)}")
            return done

        compactor.clean = traced_clean
        if apply is None:  # renamed: the parent's kill modes fall back to other lines
            return

        async def traced_apply(topic, queue, pending, *args):
            emit(f"APPLY_BEGIN {len(pending)}")
            done = await apply(topic, queue, pending, *args)
            emit(f"APPLY_END {int(done)}")
            return done

        compactor._apply = traced_apply

    def trace(self) -> None:
        self.trace_relocation()
        self.trace_compaction()


async def run(data_dir: Path, seed: int) -> None:
    await drive(CompactionDriver, data_dir, seed,
                {COMPACTED: (COMPACTED_PARTITIONS, COMPACT_CONFIGS),
                 CHURN: (PARTITIONS[CHURN], TOPIC_CONFIGS)})


def main(argv: list[str]) -> None:
    run_from_command_line(argv, CompactionDriver.name, run)


if __name__ == "__main__":
    main(sys.argv)
