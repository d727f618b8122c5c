"""Log lifecycle benchmark: ``python -m commitgate.bench.lifecycle`` (or ``commitgate bench lifecycle``).

Measures on the store alone (a MessageStore over real files in a temporary directory, as
``bench.store`` does) what the CommitLog cleaner and the log compactor (docs/architecture.md,
"The log's lifecycle") cost the appends, how fast they are, and what disk they keep:

1. Produce MB/s with the cleaner idle and with it working beside the appends. Every window
   starts from the same store: a backlog of PREFILL_FACTOR x the volume whose segments hold
   mostly expired batches with long-lived ones (retention.ms=-1) spread among them, and a
   compacted topic whose keys repeat (see ``build_backlog``). Before the window, untimed, one
   retention pass moves the log starts and counts what died. The timed window is the same
   appends in every mode (16 KiB batches over 4 partitions, the loop let run every
   YIELD_EVERY_BYTES, then the ConsumeQueue drain and the IndexBuilder catching up, as in
   ``bench.store``). In "idle" no pass runs. In the two working modes a task beside the
   appends calls ``retention.run_once()`` in a loop: in "relocating" the compactor has
   already cleaned the backlog (untimed), so the window sees the CommitLog cleaner relocating
   the oldest segments' live entries and deleting them; in "compacting" the window starts
   with the compactor cleaning the compacted topic's backlog (and relocation follows when it
   is done). The report says what they did inside the window. The modes take turns in every
   round, the order reversed every other round. The ratio is the median over the rounds of
   each round's working window against the same round's idle one, not best against best as
   in ``bench.store``: how much the cleaner gets done in a window varies from round to round,
   and the best working round is the one where it did least.
2. The cleaner's own speed on the same backlog, nothing else running: bytes relocated per
   second of cleaning, disk freed per second, the compactor's records per second, with the
   I/O limit (``cleaner_io_max_bytes_per_second``) raised and at its default.
3. Disk used against live data in a long mixed run in simulated time: a short-retention
   topic, an infinite one, a compacted one with reused keys and a group committing its
   offsets to ``__consumer_offsets`` every second, a retention pass every MIXED_PASS_EVERY_S
   simulated seconds; every MIXED_MEASURE_EVERY_S and at the end, right after a pass, the
   disk used (segment files x segment size, plus the ConsumeQueue files' blocks) is set
   against the live bytes (the cleaner's own walk) and the documented bound, garbage factor
   x live + 3 segments.

The cleaner's and compactor's work is checked for lost data on the way (every long-lived
batch still readable, the last value of every compacted key still there). Figures, not a
test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from commitgate.bench.store import (
    RECORD_VALUE,
    YIELD_EVERY_BYTES,
    _index_settled,
    append_round_robin,
    clear,
)
from commitgate.engine import MessageStore, StoreConfig, StoreStatus
from commitgate.protocol.record_batch import (
    KafkaBodyFormat,
    build_batch,
    decode_records,
    read_header,
)

MIB = 1 << 20
KIB = 1 << 10

DEFAULT_VOLUME_MB = 512
DEFAULT_SEGMENT_MB = 16
DEFAULT_ROUNDS = 5
DEFAULT_MINUTES = 60
TARGET = 0.8  # produce with the cleaner working: at least this share of idle (the issue's)
IDLE, RELOCATING, COMPACTING = "idle", "relocating", "compacting"
MODES = (IDLE, RELOCATING, COMPACTING)

# ---- the backlog (parts 1 and 2) --------------------------------------------------------------
PRODUCE_TOPIC, PRODUCE_PARTITIONS, PRODUCE_BATCH = "produce", 4, 16 * KIB
SHORT_TOPIC, KEEP_TOPIC, TABLE_TOPIC = "short", "keep", "table"
SHORT_PARTITIONS, KEEP_PARTITIONS, TABLE_PARTITIONS = 8, 8, 2
SHORT_RETENTION_MS = 10 * 60_000
EXPIRED_AGE_MS = 2 * 3600_000  # the short topic's backlog is this old: expired at the first pass
# One stripe of the backlog: 8 expired 16 KiB batches, 4 long-lived 4 KiB batches and, every
# TABLE_EVERY stripes, one batch of TABLE_RECORDS keyed records of the compacted topic (one
# of TABLE_BATCHES, in turn, each with random keys among TABLE_KEYS): about 11% of it stays
# live, spread evenly, and compaction keeps one record per key and partition.
STRIPE_SHORT, SHORT_BATCH = 8, 16 * KIB
STRIPE_KEEP, KEEP_BATCH = 4, 4 * KIB
TABLE_EVERY, TABLE_RECORDS, TABLE_KEYS, TABLE_BATCHES, TABLE_VALUE = 4, 16, 512, 64, 200
# backlog = this x the window's volume. The window's own appends count as live, and the
# cleaner relocates only while the log holds more than twice its live bytes: with about 11%
# of the backlog live, 2x keeps it over that line to the window's end.
PREFILL_FACTOR = 2
RAISED_RATE = float(1 << 40)  # "raised" I/O limit: 1 TiB/s, never reached
IDLE_PASS_SLEEP_S = 0.01  # the driving task's pause after a pass that found nothing to do
BACKLOG_SEED = 1

# ---- the mixed run (part 3), in simulated time --------------------------------------------
SIM_START_MS = 1_767_225_600_000  # 2026-01-01T00:00Z: timestamps are simulated, not the clock
MIXED_PASS_EVERY_S = 30
MIXED_MEASURE_EVERY_S = 300  # the walk that counts live bytes takes ~4 us an entry: not every pass
EVENTS_TOPIC, EVENTS_PARTITIONS, EVENTS_BATCH = "events", 4, 16 * KIB
EVENTS_RETENTION_MS = 5 * 60_000
EVENTS_SEGMENTS_PER_MINUTE = 2  # the short-retention topic's rate, in segments a minute
AUDIT_TOPIC, AUDIT_SHARE, AUDIT_BATCH = "audit", 32, 1 * KIB  # infinite: 1/32 of the events
PROFILES_TOPIC, PROFILES_PARTITIONS = "profiles", 2
PROFILES_KEYS, PROFILES_PER_SECOND, PROFILES_VALUE = 1_000, 8, 200
OFFSETS_TOPIC, GROUP = "__consumer_offsets", "group-1"  # the gateway's configs for it below
OFFSETS_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}
BOUND_SEGMENTS = 3  # the one written, the pre-allocated next one and the cleaner's reserve


# ---- counters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counters:
    """The cleaner's and the compactor's counters (differences of two readings)."""

    relocated_bytes: int = 0
    relocated_entries: int = 0
    deleted_segments: int = 0
    cleaned_partitions: int = 0
    rewritten_batches: int = 0
    dropped_batches: int = 0

    @classmethod
    def of(cls, store: MessageStore) -> Counters:
        stats, compactor = store.retention.cleaner.stats, store.retention.compactor
        return cls(stats.relocated_bytes, stats.relocated_entries, stats.deleted_segments,
                   compactor.cleaned_partitions, compactor.rewritten_batches,
                   compactor.dropped_batches)

    def __sub__(self, other: Counters) -> Counters:
        return Counters(*(a - b for a, b in zip(astuple(self), astuple(other))))

    @property
    def any(self) -> bool:
        return any(astuple(self))

    def describe(self, segment: int) -> str:
        return (f"relocated {self.relocated_bytes / MIB:,.1f} MiB ({self.relocated_entries:,} "
                f"entries), freed {self.deleted_segments} segments "
                f"({self.deleted_segments * segment / MIB:,.0f} MiB), compacted "
                f"{self.cleaned_partitions} partitions ({self.rewritten_batches:,} batches "
                f"rewritten, {self.dropped_batches:,} dropped)")


class EngineLog(logging.Handler):
    """Keeps the engine's warnings and errors for the report (a cleaner that logs is news)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


# ---- results --------------------------------------------------------------------------------


@dataclass
class ProduceSample:
    mb_per_s: float
    mode: str
    during: Counters = field(default_factory=Counters)
    seconds: float = 0.0  # the window
    in_pass_share: float = 0.0  # share of the window a pass that did work was running
    passes: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class CleanerSample:
    rate: float  # the I/O limit, bytes/s
    during: Counters
    seconds: float  # the relocation passes
    compact_seconds: float
    compact_records: int
    account_seconds: float  # the untimed pass: retention moved the log starts, dead counted
    expired_bytes: int
    segment: int
    problems: list[str] = field(default_factory=list)

    @property
    def relocated_mb_per_s(self) -> float:
        return self.during.relocated_bytes / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def freed_mb_per_s(self) -> float:
        freed = self.during.deleted_segments * self.segment
        return freed / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def records_per_s(self) -> float:
        return self.compact_records / self.compact_seconds if self.compact_seconds else 0.0


@dataclass
class DiskSample:
    minute: float
    commitlog: int  # segment files on disk x segment size
    consumequeue: int  # blocks of the ConsumeQueue files
    live: int  # the cleaner's walk
    bound: int

    @property
    def used(self) -> int:
        return self.commitlog + self.consumequeue

    @property
    def within(self) -> bool:
        return self.used <= self.bound


@dataclass
class MixedResult:
    minutes: int
    segment: int
    samples: list[DiskSample]
    live_by_partitions: int  # sum of the partitions' bytes from their log starts, at the end
    appended: int
    during: Counters
    seconds: float
    peak: int  # the most disk used after any pass
    problems: list[str] = field(default_factory=list)

    @property
    def final(self) -> DiskSample:
        return self.samples[-1]

    @property
    def worst(self) -> DiskSample:
        return max(self.samples, key=lambda s: s.used / max(s.bound, 1))


@dataclass
class Report:
    produce: dict[str, list[ProduceSample]] = field(
        default_factory=lambda: {mode: [] for mode in MODES})
    cleaner: list[CleanerSample] = field(default_factory=list)
    mixed: MixedResult | None = None
    engine_log: list[str] = field(default_factory=list)

    def best(self, mode: str) -> ProduceSample:
        return max(self.produce[mode], key=lambda v: v.mb_per_s)

    def round_ratios(self, mode: str) -> list[float]:
        """Each round's window of ``mode`` against the same round's idle window."""
        return [w.mb_per_s / i.mb_per_s for i, w in zip(self.produce[IDLE], self.produce[mode])]

    def ratio(self, mode: str) -> float:
        """The median of the rounds' own ratios (see the module doc for why not best/best)."""
        return statistics.median(self.round_ratios(mode))

    def median_round(self, mode: str) -> ProduceSample:
        """The round whose ratio is the median (the lower middle one of an even count)."""
        ratios = self.round_ratios(mode)
        order = sorted(range(len(ratios)), key=ratios.__getitem__)
        return self.produce[mode][order[(len(order) - 1) // 2]]

    @property
    def problems(self) -> list[str]:
        samples = [s for values in self.produce.values() for s in values] + self.cleaner
        found = [p for s in samples for p in s.problems]
        return found + (self.mixed.problems if self.mixed else [])


# ---- the store ------------------------------------------------------------------------------


async def _open(directory: Path, segment: int, rate: float | None = None) -> MessageStore:
    shutil.rmtree(directory, ignore_errors=True)
    overrides = {} if rate is None else {"cleaner_io_max_bytes_per_second": rate}
    # Passes run only when the benchmark calls them: the service's own timer never fires here.
    config = StoreConfig(data_dir=directory, commitlog_segment_bytes=segment,
                         retention_check_interval_ms=10**9, **overrides)
    store = MessageStore(config, KafkaBodyFormat())
    await store.open()
    return store


async def _quiesce(store: MessageStore) -> None:
    """Nothing left for a window to pay for: queue units written, the index caught up, the
    thorough ConsumeQueue flush done (its timer restarts), the page cache written back."""
    store.queues.drain()
    await _index_settled(store)
    await store.consumequeue_flush_service.flush()
    await asyncio.to_thread(os.sync)


class Appender:
    """Appends batches outside the timed windows, letting the loop run every
    YIELD_EVERY_BYTES; counts what it appended."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.bytes = 0
        self.batches: dict[tuple[str, int], int] = {}
        self._since_yield = 0

    async def append(self, topic: str, partition: int, body: memoryview, ts: int) -> int:
        result = self.store.append(topic, partition, body,
                                   offset_count=read_header(body).record_count, max_timestamp=ts)
        if result.status is not StoreStatus.OK:
            raise RuntimeError(f"append to {topic}-{partition} failed: {result}")
        key = (topic, partition)
        self.batches[key] = self.batches.get(key, 0) + 1
        self.bytes += len(body)
        self._since_yield += len(body)
        if self._since_yield >= YIELD_EVERY_BYTES:
            self._since_yield = 0
            await asyncio.sleep(0)
        return result.base_offset


def _batch(rng: random.Random, batch_bytes: int, ts: int) -> memoryview:
    """A writable batch of ~``batch_bytes`` of ~1 KiB keyless records (one value, repeated)."""
    count = max(1, batch_bytes // (RECORD_VALUE + 24))
    value = rng.randbytes(min(RECORD_VALUE, batch_bytes - 100))
    return memoryview(bytearray(build_batch([(None, value, [], ts)] * count)))


def _keyed(records: list[tuple[bytes, bytes]], ts: int) -> memoryview:
    return memoryview(bytearray(build_batch([(k, v, [], ts) for k, v in records])))


@dataclass
class Backlog:
    appender: Appender
    expired_bytes: int
    table_last: dict[tuple[int, bytes], bytes]  # (partition, key) -> the last value written
    account_seconds: float = 0.0


async def build_backlog(store: MessageStore, volume: int, *, compact: bool = False) -> Backlog:
    """The store parts 1 and 2 start from: ``volume`` bytes in stripes (see STRIPE_SHORT), the
    short topic's batches expired, then one untimed retention pass that moves the log starts
    and counts what died (``cleaner.stopping`` set: the compactor and the relocation stand
    aside, as they do while a store closes), with ``compact`` the compactor's cleaning too,
    then ``_quiesce``. Deterministic: the same batches in the same order every time."""
    rng = random.Random(BACKLOG_SEED)
    now = int(time.time() * 1000)
    old = now - EXPIRED_AGE_MS
    store.create_topic(SHORT_TOPIC, SHORT_PARTITIONS, {"retention.ms": str(SHORT_RETENTION_MS)})
    store.create_topic(KEEP_TOPIC, KEEP_PARTITIONS, {"retention.ms": "-1"})
    store.create_topic(TABLE_TOPIC, TABLE_PARTITIONS, {"cleanup.policy": "compact"})
    store.create_topic(PRODUCE_TOPIC, PRODUCE_PARTITIONS, {"retention.ms": "-1"})
    # A store counts dead bytes from its first pass on (a start walks every segment once):
    # run that pass on the empty log, as a broker has long done before any of this.
    await store.retention.run_once()
    short, keep = _batch(rng, SHORT_BATCH, old), _batch(rng, KEEP_BATCH, now)
    tables: list[tuple[memoryview, list[tuple[bytes, bytes]]]] = []
    for _ in range(TABLE_BATCHES):
        records = [(b"key-%04d" % key, rng.randbytes(TABLE_VALUE))
                   for key in rng.sample(range(TABLE_KEYS), TABLE_RECORDS)]
        tables.append((_keyed(records, old), records))
    appender = Appender(store)
    backlog = Backlog(appender, 0, {})
    stripe = 0
    while appender.bytes < volume:
        for i in range(STRIPE_SHORT):
            await appender.append(SHORT_TOPIC, (stripe * STRIPE_SHORT + i) % SHORT_PARTITIONS,
                                  short, old)
            backlog.expired_bytes += len(short)
        for i in range(STRIPE_KEEP):
            await appender.append(KEEP_TOPIC, (stripe * STRIPE_KEEP + i) % KEEP_PARTITIONS,
                                  keep, now)
        if stripe % TABLE_EVERY == 0:
            turn = stripe // TABLE_EVERY
            partition = turn % TABLE_PARTITIONS
            body, records = tables[turn // TABLE_PARTITIONS % len(tables)]
            await appender.append(TABLE_TOPIC, partition, body, old)
            backlog.table_last.update(((partition, k), v) for k, v in records)
        stripe += 1
    cleaner = store.retention.cleaner
    cleaner.stopping = True
    started = time.perf_counter()
    try:
        await store.retention.run_once()
    finally:
        cleaner.stopping = False
    backlog.account_seconds = time.perf_counter() - started
    if compact:
        await store.retention.compactor.run(int(time.time() * 1000))
    await _quiesce(store)
    return backlog


# ---- checks -----------------------------------------------------------------------------------


def _read_all(store: MessageStore, topic: str, partition: int, problems: list[str]
              ) -> list[memoryview]:
    """The partition's batches from its log start to its end (a problem noted if a read
    fails or stops short)."""
    offset, end = store.log_start_offset(topic, partition), store.log_end_offset(topic, partition)
    out: list[memoryview] = []
    while offset < end:
        result = store.read(topic, partition, offset, MIB)
        if result.status is not StoreStatus.OK or result.next_offset <= offset:
            problems.append(f"{topic}-{partition}: read at offset {offset} of [{end}) gave "
                            f"{result.status.value}, next offset {result.next_offset}")
            break
        out.extend(result.buffers)
        offset = result.next_offset
    return out


def _check_batches(store: MessageStore, topic: str, partition: int, appended: int,
                   problems: list[str]) -> None:
    """A long-lived partition: log start 0, every batch appended still readable."""
    start = store.log_start_offset(topic, partition)
    readable = len(_read_all(store, topic, partition, problems))
    if start != 0 or readable != appended:
        problems.append(f"{topic}-{partition}: {readable:,} batches readable from log start "
                        f"{start}, {appended:,} appended")


def _check_last_values(store: MessageStore, topic: str, expected: dict[tuple[int, bytes], bytes],
                       problems: list[str]) -> None:
    """A compacted topic: the last value written for every key is the last one read."""
    found: dict[tuple[int, bytes], bytes | None] = {}
    for partition in range(store.topic(topic).partitions):
        start = store.log_start_offset(topic, partition)
        for body in _read_all(store, topic, partition, problems):
            for record in decode_records(body):
                if record.offset >= start and record.key is not None:
                    found[(partition, record.key)] = record.value
    wrong = [key for key, value in expected.items() if found.get(key) != value]
    if wrong:
        problems.append(f"{topic}: {len(wrong)} of {len(expected)} keys lost their last value "
                        f"(first: partition {wrong[0][0]}, key {wrong[0][1]!r})")


def _check_backlog(store: MessageStore, backlog: Backlog) -> list[str]:
    problems: list[str] = []
    for partition in range(KEEP_PARTITIONS):
        _check_batches(store, KEEP_TOPIC, partition,
                       backlog.appender.batches.get((KEEP_TOPIC, partition), 0), problems)
    _check_last_values(store, TABLE_TOPIC, backlog.table_last, problems)
    return problems


# ---- part 1: produce beside the cleaner -----------------------------------------------------


async def drive_cleaner(store: MessageStore, passes: list[tuple[float, float]]) -> None:
    """Retention passes back to back until the cleaner is told to stop; the span of every
    pass that did something goes to ``passes``. A pass that found nothing to do is followed
    by IDLE_PASS_SLEEP_S of rest, so an idle cleaner does not spin the loop."""
    cleaner = store.retention.cleaner
    while not cleaner.stopping:
        before, started = Counters.of(store), time.perf_counter()
        await store.retention.run_once()
        if Counters.of(store) != before:
            passes.append((started, time.perf_counter()))
        else:
            await asyncio.sleep(IDLE_PASS_SLEEP_S)


async def produce_sample(directory: Path, volume: int, segment: int, mode: str
                         ) -> ProduceSample:
    store = await _open(directory, segment)
    backlog = await build_backlog(store, volume * PREFILL_FACTOR, compact=mode == RELOCATING)
    body = _batch(random.Random(2), PRODUCE_BATCH, int(time.time() * 1000))
    count = read_header(body).record_count
    ts = int(time.time() * 1000)
    for partition in range(PRODUCE_PARTITIONS):  # not timed: each queue's first file
        store.append(PRODUCE_TOPIC, partition, body, offset_count=count, max_timestamp=ts)
    await _quiesce(store)
    appends = max(volume // len(body), PRODUCE_PARTITIONS)
    passes: list[tuple[float, float]] = []
    before = Counters.of(store)
    started = time.perf_counter()
    driver = None if mode == IDLE else \
        asyncio.get_running_loop().create_task(drive_cleaner(store, passes))
    await append_round_robin(store, PRODUCE_TOPIC, PRODUCE_PARTITIONS, body, count, appends, ts)
    store.queues.drain()
    await _index_settled(store)
    ended = time.perf_counter()
    elapsed = ended - started
    during = Counters.of(store) - before
    sample = ProduceSample(appends * len(body) / elapsed / 1e6, mode, during, elapsed)
    if driver is not None:
        store.retention.cleaner.stopping = True  # what a close does first
        await driver
        sample.passes = len(passes)
        busy = sum(max(0.0, min(end, ended) - max(start, started)) for start, end in passes)
        sample.in_pass_share = busy / elapsed
        sample.problems = _check_backlog(store, backlog)
    await store.close()
    return sample


# ---- part 2: the cleaner alone ----------------------------------------------------------------


async def cleaner_sample(directory: Path, volume: int, segment: int, rate: float
                         ) -> CleanerSample:
    store = await _open(directory, segment, rate)
    backlog = await build_backlog(store, volume * PREFILL_FACTOR)
    before = Counters.of(store)
    started = time.perf_counter()
    await store.retention.compactor.run(int(time.time() * 1000))
    compact_seconds = time.perf_counter() - started
    table = store.topic(TABLE_TOPIC)
    records = sum(table.cleaned_offsets.get(p, 0) - store.log_start_offset(TABLE_TOPIC, p)
                  for p in range(TABLE_PARTITIONS))
    started = time.perf_counter()
    while True:  # passes until one finds nothing to do
        last = Counters.of(store)
        await store.retention.run_once()
        if Counters.of(store) == last:
            break
    seconds = time.perf_counter() - started
    sample = CleanerSample(rate, Counters.of(store) - before, seconds, compact_seconds,
                           records, backlog.account_seconds, backlog.expired_bytes, segment)
    sample.problems = _check_backlog(store, backlog)
    if not sample.during.relocated_bytes:
        sample.problems.append(f"the cleaner relocated nothing (limit {rate:,.0f} B/s)")
    await store.close()
    return sample


# ---- part 3: a long mixed run --------------------------------------------------------------


def disk_used(store: MessageStore) -> tuple[int, int]:
    """(CommitLog: segment files on disk, the pre-allocated one included, x segment size;
    ConsumeQueues: the blocks their files hold)."""
    segments = sum(1 for entry in os.scandir(store.paths.commitlog) if entry.is_file())
    queues = sum(path.stat().st_blocks * 512
                 for path in store.paths.consumequeue.rglob("*") if path.is_file())
    return segments * store.config.commitlog_segment_bytes, queues


async def measure(store: MessageStore, minute: float) -> DiskSample:
    walked = await store.retention.cleaner._walk_all()  # each segment: (written, live)
    live = sum(alive for _, alive in walked.values())
    commitlog, queues = disk_used(store)
    config = store.config
    bound = int(config.cleaner_garbage_factor * live) + \
        BOUND_SEGMENTS * config.commitlog_segment_bytes
    return DiskSample(minute, commitlog, queues, live, bound)


async def mixed_run(directory: Path, segment: int, minutes: int,
                    advance: Callable[[], None] = lambda: None) -> MixedResult:
    """``minutes`` simulated minutes, a second at a time: the events topic (retention 5 min)
    gets EVENTS_SEGMENTS_PER_MINUTE segments a minute in 16 KiB batches, the audit topic
    (retention -1) 1/AUDIT_SHARE of that in 1 KiB batches, the profiles topic (compacted)
    PROFILES_PER_SECOND records of random keys among PROFILES_KEYS, and the group commits the
    events' end offsets (one record per partition) to __consumer_offsets."""
    rng = random.Random(3)
    store = await _open(directory, segment)
    store.create_topic(EVENTS_TOPIC, EVENTS_PARTITIONS,
                       {"retention.ms": str(EVENTS_RETENTION_MS)})
    store.create_topic(AUDIT_TOPIC, 1, {"retention.ms": "-1"})
    store.create_topic(PROFILES_TOPIC, PROFILES_PARTITIONS, {"cleanup.policy": "compact"})
    store.create_topic(OFFSETS_TOPIC, 1, OFFSETS_CONFIGS)
    await store.retention.run_once(SIM_START_MS)  # the first pass: see build_backlog
    events = _batch(rng, EVENTS_BATCH, SIM_START_MS)
    audit = _batch(rng, AUDIT_BATCH, SIM_START_MS)
    events_per_s = EVENTS_SEGMENTS_PER_MINUTE * segment / 60
    events_credit = audit_credit = 0.0
    profiles: dict[tuple[int, bytes], bytes] = {}
    offsets: dict[tuple[int, bytes], bytes] = {}
    appender = Appender(store)
    samples: list[DiskSample] = []
    started = time.perf_counter()
    before = Counters.of(store)
    event_turn = peak = 0
    for second in range(minutes * 60):
        now = SIM_START_MS + second * 1000
        events_credit += events_per_s
        while events_credit >= len(events):
            events_credit -= len(events)
            await appender.append(EVENTS_TOPIC, event_turn % EVENTS_PARTITIONS, events, now)
            event_turn += 1
        audit_credit += events_per_s / AUDIT_SHARE
        while audit_credit >= len(audit):
            audit_credit -= len(audit)
            await appender.append(AUDIT_TOPIC, 0, audit, now)
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for key in rng.sample(range(PROFILES_KEYS), PROFILES_PER_SECOND):
            record = (b"profile-%04d" % key, rng.randbytes(PROFILES_VALUE))
            by_partition.setdefault(key % PROFILES_PARTITIONS, []).append(record)
        for partition, records in sorted(by_partition.items()):
            await appender.append(PROFILES_TOPIC, partition, _keyed(records, now), now)
            profiles.update(((partition, k), v) for k, v in records)
        commits = [(f"{GROUP}/{EVENTS_TOPIC}/{p}".encode(),
                    b"%d" % store.log_end_offset(EVENTS_TOPIC, p))
                   for p in range(EVENTS_PARTITIONS)]
        await appender.append(OFFSETS_TOPIC, 0, _keyed(commits, now), now)
        offsets.update(((0, k), v) for k, v in commits)
        if (second + 1) % MIXED_PASS_EVERY_S == 0:
            await store.retention.run_once(now)
            peak = max(peak, sum(disk_used(store)))
            if (second + 1) % MIXED_MEASURE_EVERY_S == 0:
                samples.append(await measure(store, (second + 1) / 60))
        if (second + 1) % 60 == 0:
            advance()
    if not samples or samples[-1].minute != minutes:
        await store.retention.run_once(SIM_START_MS + minutes * 60_000)
        samples.append(await measure(store, minutes))
    seconds = time.perf_counter() - started
    during = Counters.of(store) - before
    problems: list[str] = []
    _check_batches(store, AUDIT_TOPIC, 0, appender.batches.get((AUDIT_TOPIC, 0), 0), problems)
    _check_last_values(store, PROFILES_TOPIC, profiles, problems)
    _check_last_values(store, OFFSETS_TOPIC, offsets, problems)
    for partition in range(EVENTS_PARTITIONS):
        _read_all(store, EVENTS_TOPIC, partition, problems)
        if minutes * 60_000 > EVENTS_RETENTION_MS + MIXED_PASS_EVERY_S * 1000 and \
                store.log_start_offset(EVENTS_TOPIC, partition) == 0:
            problems.append(f"{EVENTS_TOPIC}-{partition}: retention never moved its log start")
    by_partitions = sum([await store.partition_size(topic.name, p)
                         for topic in store.topics() for p in range(topic.partitions)])
    if by_partitions != samples[-1].live:
        problems.append(f"live bytes: the cleaner's walk counts {samples[-1].live:,}, the "
                        f"partitions from their log starts {by_partitions:,}")
    await store.close()
    return MixedResult(minutes, segment, samples, by_partitions, appender.bytes, during,
                       seconds, peak, problems)


# ---- the run and the report ---------------------------------------------------------------


def run(directory: Path, volume_mb: int, segment_mb: int, rounds: int, minutes: int,
        console: Console) -> Report:
    volume, segment = volume_mb * MIB, segment_mb * MIB
    report = Report()
    engine_log = EngineLog()
    logging.getLogger("commitgate.engine").addHandler(engine_log)
    try:
        with Progress(console=console, transient=True) as progress:
            produce = progress.add_task("produce", total=len(MODES) * rounds)
            cleaner = progress.add_task("cleaner alone", total=2)
            mixed = progress.add_task(f"mixed run: {minutes} simulated minutes", total=minutes)
            _produce_rounds(directory, volume, segment, rounds, report, progress, produce)
            for rate in (RAISED_RATE, StoreConfig.cleaner_io_max_bytes_per_second):
                progress.update(cleaner, description=f"cleaner alone, limit {_rate(rate)}")
                clear(directory)
                report.cleaner.append(asyncio.run(
                    cleaner_sample(directory, volume, segment, rate)))
                progress.advance(cleaner)
            clear(directory)
            report.mixed = asyncio.run(mixed_run(directory, segment, minutes,
                                                 lambda: progress.advance(mixed)))
    finally:
        logging.getLogger("commitgate.engine").removeHandler(engine_log)
        shutil.rmtree(directory, ignore_errors=True)
    report.engine_log = engine_log.lines
    return report


def _produce_rounds(directory: Path, volume: int, segment: int, rounds: int, report: Report,
                    progress: Progress, task: TaskID) -> None:
    """Every mode once per round, every other round backwards (A B C, C B A, ...): noise on a
    shared machine hits all modes alike, and a drift during the run favours none."""
    for round_number in range(1, rounds + 1):
        for mode in MODES if round_number % 2 else reversed(MODES):
            progress.update(task, description=f"produce round {round_number}/{rounds}: {mode}")
            clear(directory)
            report.produce[mode].append(asyncio.run(
                produce_sample(directory, volume, segment, mode)))
            progress.advance(task)


def _rate(rate: float) -> str:
    return "raised" if rate >= RAISED_RATE else f"{rate / MIB:,.0f} MiB/s (default)"


def _range(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


def _cost(report: Report, mode: str) -> str:
    """What relocation cost the appends: the working windows' extra seconds over the same
    rounds' idle ones, summed, per MiB relocated in them (noisy: a sum over the rounds)."""
    pairs = list(zip(report.produce[IDLE], report.produce[mode]))
    moved = sum(w.during.relocated_bytes for _, w in pairs) / MIB
    if mode != RELOCATING or not moved:
        return ""
    extra = sum(w.seconds - i.seconds for i, w in pairs)
    return f"; the windows took {extra * 1000 / moved:,.0f} ms longer per MiB relocated"


def _verdict(ratio: float) -> str:
    return "met" if ratio >= TARGET else "missed"


def print_report(report: Report, console: Console, volume_mb: int, segment_mb: int) -> None:
    segment = segment_mb * MIB
    rounds = len(report.produce[IDLE])
    table = Table(title=f"Produce beside the cleaner: {volume_mb:,} MiB of 16 KiB batches over "
                        f"{PRODUCE_PARTITIONS} partitions, {segment_mb} MiB segments, backlog "
                        f"{PREFILL_FACTOR * volume_mb:,} MiB ({rounds} rounds; ratio: median "
                        f"of the rounds' own)")
    table.add_column("cleaner", no_wrap=True)
    table.add_column("MB/s median", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("rounds", justify="right")
    table.add_column("best", justify="right")
    table.add_column("what the cleaner did in the window (the median round)")
    notes = []
    for mode in MODES:
        samples, best = report.produce[mode], report.best(mode)
        speeds = [s.mb_per_s for s in samples]
        if mode == IDLE:
            ratio, did = "", "nothing (no pass ran)"
        else:
            ratio = f"{report.ratio(mode):.1%} of idle"
            middle = report.median_round(mode)
            did = (f"{middle.during.describe(segment)}: "
                   f"{middle.during.relocated_bytes / middle.seconds / 1e6:,.0f} MB/s relocated "
                   f"in {middle.seconds:.2f} s; a pass that did work ran "
                   f"{middle.in_pass_share:.0%} of the window" if middle.during.any
                   else "NOTHING: this window measured no cleaning")
            relocated = [f"{s.during.relocated_bytes / MIB:,.1f}" for s in samples]
            compacted = [f"{s.during.rewritten_batches + s.during.dropped_batches:,}"
                         for s in samples]
            notes.append(
                f"{mode}: target {TARGET:.0%} {_verdict(report.ratio(mode))}; ratio per round "
                f"{', '.join(f'{r:.0%}' for r in report.round_ratios(mode))}, best against "
                f"best {best.mb_per_s / report.best(IDLE).mb_per_s:.1%}; relocated per round "
                f"{', '.join(relocated)} MiB; compacted batches (rewritten + dropped) per round "
                f"{', '.join(compacted)}" + _cost(report, mode))
        table.add_row(mode, f"{statistics.median(speeds):,.0f}", ratio, _range(speeds),
                      f"{best.mb_per_s:,.0f}", did)
    console.print(table)
    for note in notes:
        console.print(f"  {note}")

    table = Table(title="The cleaner alone on the same backlog (passes until one finds nothing "
                        "to do)")
    for name in ("I/O limit", "relocated", "MB/s relocated", "MB/s of disk freed",
                 "compaction (first)", "retention pass (untimed)"):
        table.add_column(name, justify="left" if name == "I/O limit" else "right")
    for sample in report.cleaner:
        during = sample.during
        table.add_row(
            _rate(sample.rate),
            f"{during.relocated_bytes / MIB:,.0f} MiB in {sample.seconds:.2f} s",
            f"{sample.relocated_mb_per_s:,.0f}",
            f"{sample.freed_mb_per_s:,.0f}",
            f"{sample.records_per_s:,.0f} records/s ({sample.compact_records:,} in "
            f"{sample.compact_seconds:.2f} s; {during.rewritten_batches:,} batches rewritten, "
            f"{during.dropped_batches:,} dropped)",
            f"{sample.expired_bytes / MIB:,.0f} MiB expired, counted in "
            f"{sample.account_seconds:.2f} s")
    console.print(table)

    mixed = report.mixed
    if mixed is not None:
        table = Table(title=f"Disk after {mixed.minutes} simulated minutes ({segment_mb} MiB "
                            f"segments, a pass every {MIXED_PASS_EVERY_S} s, measured every "
                            f"{MIXED_MEASURE_EVERY_S // 60} min; bound "
                            f"{StoreConfig.cleaner_garbage_factor:g} x live + {BOUND_SEGMENTS} "
                            f"segments)")
        for name in ("when", "CommitLog", "ConsumeQueues", "disk used", "live", "disk / live",
                     "bound", "within / over"):
            table.add_column(name, justify="left" if name == "when" else "right")
        rows = [("after the last pass", mixed.final)]
        if mixed.worst is not mixed.final:
            rows.append((f"worst measure (minute {mixed.worst.minute:g})", mixed.worst))
        for name, sample in rows:
            table.add_row(name, f"{sample.commitlog / MIB:,.0f} MiB",
                          f"{sample.consumequeue / MIB:,.1f} MiB",
                          f"{sample.used / MIB:,.1f} MiB", f"{sample.live / MIB:,.1f} MiB",
                          f"{sample.used / max(sample.live, 1):.2f}",
                          f"{sample.bound / MIB:,.1f} MiB", "within" if sample.within else "over")
        console.print(table)
        over = sum(not s.within for s in mixed.samples)
        console.print(f"  {mixed.appended / MIB:,.0f} MiB appended in {mixed.seconds:.1f} s; "
                      f"the cleaner {mixed.during.describe(segment)}; relocated "
                      f"{mixed.during.relocated_bytes / max(mixed.appended, 1):.2f} bytes per "
                      f"byte appended; {over} of {len(mixed.samples)} measures over the "
                      f"bound; most disk used after any pass {mixed.peak / MIB:,.1f} MiB; "
                      f"live by partitions at the end {mixed.live_by_partitions / MIB:,.1f} MiB")

    for line in report.problems:
        console.print(f"  [bold red]problem[/]: {line}")
    if report.engine_log:
        console.print(f"  engine warnings/errors: {len(report.engine_log)}")
        for line in report.engine_log[:10]:
            console.print(f"    {line}")
    console.print(summary(report))


def summary(report: Report) -> str:
    parts = [f"produce while {mode} {report.ratio(mode):.1%} of idle" for mode in MODES[1:]]
    worst = min(report.ratio(mode) for mode in MODES[1:])
    parts[-1] += f" (target {TARGET:.0%}: {_verdict(worst)})"
    fast = next((s for s in report.cleaner if s.rate >= RAISED_RATE), None)
    slow = next((s for s in report.cleaner if s.rate < RAISED_RATE), None)
    if fast and slow:
        parts.append(f"cleaner {fast.relocated_mb_per_s:,.0f} MB/s relocated "
                     f"({slow.relocated_mb_per_s:,.0f} at the default limit)")
    if report.mixed is not None:
        final = report.mixed.final
        parts.append(f"disk {final.used / max(final.live, 1):.2f} x live after "
                     f"{report.mixed.minutes} simulated minutes "
                     f"({'within' if final.within else 'over'} the bound)")
    parts.append(f"{len(report.problems)} problems")
    return "lifecycle: " + "; ".join(parts)


def main(data_dir: Path | None = None, volume_mb: int = DEFAULT_VOLUME_MB,
         segment_mb: int = DEFAULT_SEGMENT_MB, rounds: int = DEFAULT_ROUNDS,
         minutes: int = DEFAULT_MINUTES) -> Report:
    if min(volume_mb, segment_mb, rounds, minutes) < 1:
        raise ValueError("--volume-mb, --segment-mb, --rounds and --minutes must be at least 1")
    wide = Console().is_terminal or "COLUMNS" in os.environ
    console = Console(width=None if wide else 160)
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="commitgate-lifecycle-", dir=data_dir))
    try:
        report = run(base / "store", volume_mb, segment_mb, rounds, minutes, console)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_report(report, console, volume_mb, segment_mb)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="where to write (temp dir)")
    parser.add_argument("--volume-mb", type=int, default=DEFAULT_VOLUME_MB,
                        help="MiB appended in each timed produce window; the backlog is "
                             f"{PREFILL_FACTOR}x this")
    parser.add_argument("--segment-mb", type=int, default=DEFAULT_SEGMENT_MB,
                        help="CommitLog segment size in MiB")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help="produce rounds, each mode once per round (the ratio is the "
                             "median of the rounds' own)")
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES,
                        help="simulated minutes of the mixed run")
    args = parser.parse_args()
    main(args.data_dir, args.volume_mb, args.segment_mb, args.rounds, args.minutes)
