"""Disk-full driver: fills a tiny filesystem through the store, frees space, checks everything.

Run as ``python -m tests.engine.disk_full_driver DIR`` where DIR is a small, otherwise empty
filesystem (``tests.engine.test_disk_full`` mounts a 2 MiB tmpfs there in a private mount
namespace, which this process and its children share). The disk fills twice, on the two
places an append can need new space:

Phase "segment": a ballast file is written first; then big batches with few records are
appended until one returns DISK_ERROR, which happens when the next CommitLog segment cannot be
reserved. Every acknowledged batch must read back byte-identical, the failed append retried
must fail the same clean way, a tiny append to every partition may succeed or fail but never
raise. Deleting the ballast must let the failed append and more succeed.

Phase "consumequeue": a second ballast takes every free byte; then small batches with many
records are appended until DISK_ERROR, which now comes from a new ConsumeQueue file (the
current segment still has room). The ballast is deleted and the store restarted at once, as an
operator would: a child process opens it (a clean start), checks it and dies without closing
it, a crash before that run saved a checkpoint. The next start is unclean. After each start,
every acknowledged batch and nothing else must be there; then appends must continue. A final
clean restart checks it all again.

The last stdout line is a JSON summary; ``problems`` lists every check that failed (the driver
keeps going after one, so a single run shows them all). The exit status is 0 only when there
are none.
"""
from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commitgate.engine import MessageStore, StoreConfig, StoreStatus
from commitgate.engine.commit_log import END_FILE_MIN_BLANK_LENGTH, PREFIX_SIZE, topic_trailer
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch
from tests.engine.crash_writer import batch_header

TOPIC = "full"
PARTITIONS = 4
SEGMENT_BYTES = 256 * 1024
BALLAST_BYTES = 1024 * 1024  # frees room for new segments beside the 512 KiB reserve, with a margin
MAX_ATTEMPTS = 10_000
RETRIES_WHILE_FULL = 5
APPENDS_AFTER_FREE = 20
READ_CHUNK = 1 << 20
CHECK_AND_CRASH = "--check-and-crash"

Records = list[tuple[bytes | None, bytes, list, int]]
Batch = tuple[int, Records]  # (partition, records)


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(
        data_dir=root,
        flush_disk_type="ASYNC_FLUSH",
        commitlog_segment_bytes=SEGMENT_BYTES,
        consumequeue_entries_per_file=100,
        index_hash_slots=64,
        index_max_entries=1024,
        # Retention deletes the oldest segments of a too-full disk; this run is about appends.
        retention_check_interval_ms=3_600_000,
    )


@dataclass
class Phase:
    name: str
    kind: str = ""  # where the first DISK_ERROR came from: "segment" or "consumequeue"
    error: str = ""
    attempts: int = 0
    retries_failed: int = 0
    probe_statuses: list[str] = field(default_factory=list)
    after_free_ok: int = 0


@dataclass
class Summary:
    phases: list[Phase] = field(default_factory=list)
    acked: int = 0
    opens: list[dict] = field(default_factory=list)  # clean / cut_at of every reopen
    expected_ends: dict[int, int] = field(default_factory=dict)
    final_ends: dict[int, int] = field(default_factory=dict)
    first_batch: list = field(default_factory=list)  # [partition, base offset] of the first ack
    index_hits: list = field(default_factory=list)  # lookup_key of its first key at the end
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Acked:
    count: int
    digest: str


def now_ms() -> int:
    return int(time.time() * 1000)


def big_batch(counter: int) -> Batch:
    """Few records, 8-40 KiB: segments fill long before ConsumeQueue files do."""
    rng = random.Random(f"segment:{counter}")
    count = rng.randint(1, 3)
    size = rng.randint(8_000, 40_000) // count
    ts = now_ms()
    return rng.randrange(PARTITIONS), [
        (f"big-{counter}-{i}".encode(), rng.randbytes(size), [], ts + i) for i in range(count)]


def small_batch(counter: int) -> Batch:
    """1-20 records of a few bytes: ConsumeQueue files fill long before the segment does."""
    rng = random.Random(f"consumequeue:{counter}")
    count = rng.randint(1, 20)
    ts = now_ms()
    return rng.randrange(PARTITIONS), [
        (f"small-{counter}-{i}".encode(), rng.randbytes(rng.randint(1, 40)), [], ts + i)
        for i in range(count)]


class Driver:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.summary = Summary()
        self.acked: dict[tuple[int, int], Acked] = {}  # (partition, base offset) -> batch
        self.first_key: bytes | None = None
        self.store: MessageStore | None = None

    def problem(self, text: str) -> None:
        self.summary.problems.append(text)

    # ---- space ----------------------------------------------------------------------------

    def write_ballast(self, name: str, limit: int | None) -> Path:
        """``limit`` bytes of ballast, or (None) every byte the filesystem has left."""
        path = self.root / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        written, chunk = 0, os.urandom(64 * 1024)
        try:
            while limit is None or written < limit:
                written += os.write(fd, chunk[: len(chunk) if limit is None else limit - written])
        except OSError as exc:
            if limit is not None or exc.errno != errno.ENOSPC:
                raise
            written += self._fill_last_bytes(fd)
        finally:
            os.close(fd)
        return path

    @staticmethod
    def _fill_last_bytes(fd: int) -> int:
        """After a 64 KiB write failed: take the remaining pages one at a time."""
        written = 0
        try:
            while True:
                written += os.write(fd, bytes(4096))
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        return written

    # ---- store life cycle ------------------------------------------------------------------

    async def open_store(self) -> None:
        self.store = MessageStore(store_config(self.root / "store"), KafkaBodyFormat())
        report = await self.store.open()
        self.summary.opens.append({"clean": report.clean, "cut_at": report.cut_at})
        if self.store.topic(TOPIC) is None:
            result = self.store.create_topic(TOPIC, PARTITIONS)
            if result.status is not StoreStatus.OK:
                raise RuntimeError(f"create_topic: {result}")

    async def close_store(self) -> None:
        await self.store.close()
        self.store = None

    def restart_and_crash(self, stage: str) -> None:
        """A child process opens the store, checks it, and dies without closing it."""
        acked = [[p, base, batch.count, batch.digest] for (p, base), batch in self.acked.items()]
        child = subprocess.run(
            [sys.executable, "-m", "tests.engine.disk_full_driver", CHECK_AND_CRASH,
             str(self.root), stage], input=json.dumps(acked), capture_output=True, text=True,
            timeout=60, check=False)
        lines = child.stdout.strip().splitlines()
        if child.returncode != 0 or not lines:
            self.problem(f"{stage}: child failed (rc {child.returncode}): {child.stderr[-2000:]}")
            return
        self.summary.problems += json.loads(lines[-1])

    # ---- appends --------------------------------------------------------------------------

    def append(self, batch: Batch) -> tuple[StoreStatus, str]:
        partition, records = batch
        body = bytearray(build_batch(records))
        result = self.store.append(TOPIC, partition, memoryview(body), offset_count=len(records),
                                   max_timestamp=max(r[3] for r in records))
        if result.status is StoreStatus.OK:
            key = (partition, result.base_offset)
            if key in self.acked:
                self.problem(f"offset {key} assigned twice")
            self.acked[key] = Acked(len(records), hashlib.sha256(body).hexdigest())
            self.summary.acked = len(self.acked)
            if self.first_key is None:
                self.first_key = records[0][0]
                self.summary.first_batch = [partition, result.base_offset]
        return result.status, result.error

    def needs_new_segment(self, batch: Batch) -> bool:
        """Whether this append must roll the CommitLog (read-only look at the last segment)."""
        files = self.store.commit_log.queue.files
        body = len(build_batch(batch[1]))
        size = PREFIX_SIZE + body + len(topic_trailer(TOPIC)) + END_FILE_MIN_BLANK_LENGTH
        return not files or size > files[-1].free_bytes

    def fill(self, phase: Phase, make: Callable[[int], Batch]) -> Batch | None:
        """Append until DISK_ERROR; returns the batch that failed."""
        for attempt in range(MAX_ATTEMPTS):
            phase.attempts = attempt + 1
            batch = make(attempt)
            rolls = self.needs_new_segment(batch)
            status, error = self.append(batch)
            if status is StoreStatus.DISK_ERROR:
                phase.kind, phase.error = ("segment" if rolls else "consumequeue"), error
                return batch
            if status is not StoreStatus.OK:
                self.problem(f"{phase.name}: attempt {attempt} returned {status.value}: {error}")
                return None
        self.problem(f"{phase.name}: no DISK_ERROR after {MAX_ATTEMPTS} appends")
        return None

    def retry_while_full(self, phase: Phase, batch: Batch) -> None:
        """The failed append again: still no space, so it must fail the same clean way."""
        for _ in range(RETRIES_WHILE_FULL):
            status, error = self.append(batch)
            if status is StoreStatus.DISK_ERROR:
                phase.retries_failed += 1
            else:
                self.problem(f"{phase.name}: retry on a full disk returned {status.value} {error}")

    def probe_partitions(self, phase: Phase) -> None:
        """Tiny appends may still fit (a page already allocated); either way, no exception."""
        for partition in range(PARTITIONS):
            status, error = self.append((partition, [(None, b"probe", [], now_ms())]))
            phase.probe_statuses.append(status.value)
            if status not in (StoreStatus.OK, StoreStatus.DISK_ERROR):
                self.problem(f"{phase.name}: probe of partition {partition}: {status.value} "
                             f"{error}")

    def append_more(self, phase: Phase, batches: list[Batch]) -> None:
        for batch in batches:
            status, error = self.append(batch)
            if status is StoreStatus.OK:
                phase.after_free_ok += 1
            else:
                self.problem(f"{phase.name}: append after freeing space: {status.value} {error}")

    # ---- checks ---------------------------------------------------------------------------

    def expected_ends(self) -> dict[int, int]:
        ends = {p: 0 for p in range(PARTITIONS)}
        for (partition, base), batch in self.acked.items():
            ends[partition] = max(ends[partition], base + batch.count)
        return ends

    def verify(self, stage: str) -> dict[int, int]:
        """Every partition chains from 0 to its end; every acknowledged batch is intact; the
        ends are exactly those of the acknowledged batches (a failed append left nothing)."""
        found: dict[tuple[int, int], Acked] = {}
        ends = {p: self.read_partition(stage, p, found) for p in range(PARTITIONS)}
        for key, batch in self.acked.items():
            if found.get(key) != batch:
                self.problem(f"{stage}: acknowledged batch {key} is {found.get(key)}, "
                             f"expected {batch}")
        if ends != self.expected_ends():
            self.problem(f"{stage}: log end offsets {ends}, but the acknowledged batches end "
                         f"at {self.expected_ends()}")
        return ends

    def read_partition(self, stage: str, partition: int, found: dict) -> int:
        offset = 0
        end = self.store.log_end_offset(TOPIC, partition)
        # Bounded: every batch holds at least one offset, so a healthy chain needs <= end reads.
        for _ in range(end + 1):
            if offset >= end:
                return end
            result = self.store.read(TOPIC, partition, offset, READ_CHUNK)
            if result.status is not StoreStatus.OK or not result.buffers:
                self.problem(f"{stage}: {TOPIC}-{partition} read at {offset} (end {end}): "
                             f"{result.status.value}, {len(result.buffers)} batches")
                return end
            for buffer in result.buffers:
                base, count = batch_header(buffer)
                digest = hashlib.sha256(buffer).hexdigest()
                buffer.release()  # a live view would keep the segment mapped at close
                if base != offset or count < 1:
                    self.problem(f"{stage}: {TOPIC}-{partition} expected a batch at offset "
                                 f"{offset}, read one at base {base} count {count} (end {end})")
                    return end
                found[(partition, base)] = Acked(count, digest)
                offset = base + count
        self.problem(f"{stage}: {TOPIC}-{partition} read did not reach its end {end}")
        return end


async def segment_phase(driver: Driver, ballast: Path) -> None:
    phase = Phase("segment")
    driver.summary.phases.append(phase)
    failed = driver.fill(phase, big_batch)
    if failed is None:
        return
    driver.verify("segment: disk full")
    driver.retry_while_full(phase, failed)
    driver.probe_partitions(phase)
    driver.verify("segment: after retries")
    ballast.unlink()
    driver.append_more(phase, [failed] + [big_batch(MAX_ATTEMPTS + i)
                                          for i in range(APPENDS_AFTER_FREE)])
    driver.verify("segment: space freed")


async def consumequeue_phase(driver: Driver) -> None:
    phase = Phase("consumequeue")
    driver.summary.phases.append(phase)
    ballast = driver.write_ballast("ballast-rest", None)
    failed = driver.fill(phase, small_batch)
    if failed is None:
        return
    driver.verify("consumequeue: disk full")
    driver.retry_while_full(phase, failed)
    driver.verify("consumequeue: after retries")
    ballast.unlink()
    # Restart at once, with no append in between: a clean start, checked, then a crash
    # before that run saved a checkpoint; then an unclean start.
    await driver.close_store()
    driver.restart_and_crash("consumequeue: clean restart")
    await driver.open_store()
    if driver.summary.opens[-1]["clean"]:
        driver.problem("the start after a crash was reported clean")
    driver.verify("consumequeue: unclean restart")
    driver.append_more(phase, [small_batch(MAX_ATTEMPTS + i) for i in range(APPENDS_AFTER_FREE)])
    driver.verify("consumequeue: appends after restart")


async def drive(driver: Driver) -> None:
    ballast = driver.write_ballast("ballast", BALLAST_BYTES)
    await driver.open_store()
    await segment_phase(driver, ballast)
    await consumequeue_phase(driver)
    await driver.close_store()
    await driver.open_store()
    driver.summary.expected_ends = driver.expected_ends()
    driver.summary.final_ends = driver.verify("final clean restart")
    # The IndexFiles (small, so they roll) went through both full disks and three restarts.
    hits = await driver.store.lookup_key(TOPIC, driver.first_key)
    driver.summary.index_hits = [list(hit) for hit in hits]
    await driver.close_store()


async def check_and_crash(root: Path, stage: str) -> None:
    """The child of ``Driver.restart_and_crash``: the acknowledged batches come on stdin."""
    driver = Driver(root)
    for partition, base, count, digest in json.load(sys.stdin):
        driver.acked[(partition, base)] = Acked(count, digest)
    await driver.open_store()
    if not driver.summary.opens[-1]["clean"]:
        driver.problem(f"{stage}: the start after a clean close was reported unclean")
    driver.verify(stage)
    print(json.dumps(driver.summary.problems), flush=True)
    os._exit(0)  # no close: the abort marker stays and no checkpoint is saved by this run


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == CHECK_AND_CRASH:
        asyncio.run(check_and_crash(Path(argv[2]), argv[3]))
    if len(argv) != 2:
        print("usage: python -m tests.engine.disk_full_driver DIR", file=sys.stderr)
        return 2
    driver = Driver(Path(argv[1]))
    try:
        asyncio.run(drive(driver))
    # The store must never raise for a full disk: report any exception, do not hide it.
    except Exception:  # noqa: BLE001
        driver.problem("exception:\n" + traceback.format_exc())
    print(json.dumps(asdict(driver.summary), sort_keys=True), flush=True)
    return 1 if driver.summary.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
