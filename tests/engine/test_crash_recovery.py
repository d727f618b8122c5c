"""SIGKILL a SYNC_FLUSH writer again and again; no acknowledged batch may ever be lost.

Every round starts ``tests.engine.crash_writer`` on the same data directory, lets it run a
bounded random time after its first acknowledgement, SIGKILLs it and then opens the store in
this process (recovery runs there) to check every batch acknowledged so far, byte for byte,
and that each partition's offsets chain without gaps from the log start to the log end. The
next writer must continue exactly where that check found the ends.

A SIGKILL keeps the page cache, so these tests exercise recovery (abort marker, checkpoint,
CommitLog scan, ConsumeQueue repair and replay), torn tails left by a write cut short by the
kill, and pre-allocated segments, not the fsync itself.
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Generic, TypeVar

import pytest

from commitgate.engine import MessageStore, StoreStatus
from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import PREFIX_SIZE, CommitLog, DispatchRequest, topic_trailer
from commitgate.engine.mapped_file_queue import MappedFileQueue, segment_starts
from commitgate.engine.paths import StorePaths, offset_file_name
from commitgate.engine.recovery import RecoveryReport
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch
from tests.engine.crash_writer import (
    CQ_ENTRIES_PER_FILE,
    PARTITIONS,
    SEGMENT_BYTES,
    TOPIC,
    batch_header,
    store_config,
)

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 30
FIRST_ACK_TIMEOUT_S = 20.0  # interpreter start + store open + recovery + first fsync
KILL_DELAY_S = (0.2, 1.5)  # random, after the first ACK: the only sleep in these tests
EXIT_TIMEOUT_S = 10.0
READ_CHUNK = 4 << 20

Key = tuple[int, int]  # (partition, base offset)


@dataclass(frozen=True)
class Ack:
    partition: int
    base: int
    count: int
    digest: str

    @property
    def end(self) -> int:
        return self.base + self.count


@dataclass
class RoundOutput:
    opens: dict[int, int]  # partition -> log end offset the writer saw after its recovery
    acks: list[Ack]
    returncode: int
    stderr: str


@dataclass
class StoredBatch:
    count: int
    digest: str


@dataclass
class StoreState:
    report: RecoveryReport
    batches: dict[Key, StoredBatch] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)


# ---- running the writer ---------------------------------------------------------------------


class LineCollector(threading.Thread):
    """Drains a child's stdout (a full pipe would stall it), keeping its whole lines; ``step``
    sees each of them, ``ended`` runs at the end of the output."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: list[str] = []

    def run(self) -> None:
        try:
            for line in self.stream:
                if not line.endswith("\n"):  # cut by the kill: never acknowledged
                    break
                self.lines.append(line)
                self.step(line)
        finally:
            self.ended()

    def step(self, line: str) -> None:
        pass

    def ended(self) -> None:
        pass


class FirstAckCollector(LineCollector):
    """Signals the writer's first ACK (or the end of its output)."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self.first_ack_or_eof = threading.Event()

    def step(self, line: str) -> None:
        if line.startswith("ACK "):
            self.first_ack_or_eof.set()

    def ended(self) -> None:
        self.first_ack_or_eof.set()


Collector = TypeVar("Collector", bound=LineCollector)


@dataclass
class KilledChild(Generic[Collector]):
    collector: Collector  # holds the child's output lines
    reached: bool  # the child got where it was to be killed
    returncode: int
    stderr: str


def run_until_killed(module: str, data_dir: Path, seed: int, stderr_path: Path,
                     collector_of: Callable[[subprocess.Popen], Collector],
                     kill_point: Callable[[subprocess.Popen, Collector], bool]
                     ) -> KilledChild[Collector]:
    """Start ``python -m module DATA_DIR SEED`` (cwd = the project root) with
    ``collector_of(proc)`` draining its stdout, wait in ``kill_point(proc, collector)``
    (which returns whether the child got where it was to be killed; the collector may kill it
    there itself), SIGKILL it and collect its output."""
    with stderr_path.open("w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", module, str(data_dir), str(seed)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
        collector = collector_of(proc)
        collector.start()
        try:
            reached = kill_point(proc, collector)
            proc.kill()  # a no-op when the collector killed it already
            proc.wait(EXIT_TIMEOUT_S)
            collector.join(EXIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(EXIT_TIMEOUT_S)
            proc.stdout.close()
        stderr.seek(0)
        return KilledChild(collector, reached, proc.returncode, stderr.read())


def run_writer_round(data_dir: Path, seed: int, rng: random.Random, stderr_path: Path
                     ) -> RoundOutput:
    """Start the writer, SIGKILL it a random while after its first ACK, collect its output."""
    def a_while_after_the_first_ack(proc: subprocess.Popen, collector: FirstAckCollector
                                    ) -> bool:
        ready = collector.first_ack_or_eof.wait(FIRST_ACK_TIMEOUT_S)
        alive = proc.poll() is None
        if ready and alive:
            time.sleep(rng.uniform(*KILL_DELAY_S))
        return ready and alive

    child = run_until_killed("tests.engine.crash_writer", data_dir, seed, stderr_path,
                             lambda proc: FirstAckCollector(proc.stdout),
                             a_while_after_the_first_ack)
    output = parse_lines(child.collector.lines, child.returncode, child.stderr)
    assert child.reached, f"writer (seed {seed}) gave no ACK in {FIRST_ACK_TIMEOUT_S}s or " \
                          f"exited early (rc {child.returncode}):\n{output.stderr[-4000:]}"
    assert child.returncode == -9, f"writer ended by itself (rc {child.returncode}):\n" \
                                   f"{output.stderr[-4000:]}"
    return output


def parse_lines(lines: list[str], returncode: int, stderr: str) -> RoundOutput:
    opens: dict[int, int] = {}
    acks: list[Ack] = []
    for line in lines:
        kind, *fields = line.split()
        if kind == "OPEN":
            opens[int(fields[0])] = int(fields[1])
        elif kind == "ACK":
            acks.append(Ack(int(fields[0]), int(fields[1]), int(fields[2]), fields[3]))
    return RoundOutput(opens, acks, returncode, stderr)


# ---- checking the store ---------------------------------------------------------------------


def read_batches(store: MessageStore, topic: str, partition: int, start: int, end: int
                 ) -> dict[int, StoredBatch]:
    """Every batch from ``start`` to ``end`` by base offset; asserts that base offsets chain
    from ``start`` and that the last batch ends at ``end``."""
    where = f"{topic}-{partition}"
    offset = start
    batches: dict[int, StoredBatch] = {}
    while offset < end:
        result = store.read(topic, partition, offset, READ_CHUNK)
        assert result.status is StoreStatus.OK, (where, offset, end, result.status)
        assert result.buffers, f"{where}: no batch at {offset} below the log end {end} (log " \
                               f"start {start})"
        for buffer in result.buffers:
            base, count = batch_header(buffer)
            digest = hashlib.sha256(buffer).hexdigest()
            buffer.release()  # a view into the mapped segment would keep it open at close
            assert base == offset, f"{where}: expected a batch at offset {offset}, the next " \
                                   f"one starts at {base} (log start {start}, end {end})"
            assert count >= 1, (where, base, count)
            batches[base] = StoredBatch(count, digest)
            offset = base + count
        assert result.next_offset == offset, (where, result.next_offset, offset)
    assert offset == end, f"{where}: the last batch ends at offset {offset}, past the log end " \
                          f"offset {end}"
    return batches


def read_partition(store: MessageStore, partition: int) -> tuple[dict[Key, StoredBatch], int]:
    """Every batch from the log start to the log end; asserts that base offsets chain."""
    start = store.log_start_offset(TOPIC, partition)
    assert start == 0, f"partition {partition}: log start {start}, nothing was deleted"
    end = store.log_end_offset(TOPIC, partition)
    batches = read_batches(store, TOPIC, partition, start, end)
    return {(partition, base): batch for base, batch in batches.items()}, end


async def read_store(data_dir: Path) -> StoreState:
    """Open the store (recovery happens here), read every partition, close it cleanly."""
    store = MessageStore(store_config(data_dir), KafkaBodyFormat())
    state = StoreState(await store.open())
    try:
        for partition in range(PARTITIONS):
            batches, state.ends[partition] = read_partition(store, partition)
            state.batches.update(batches)
    finally:
        await store.close()
    return state


def assert_acks_intact(state: StoreState, acked: dict[Key, Ack], *, lost: Key | None = None
                       ) -> None:
    """Every acknowledged batch (except ``lost``) is stored, byte-identical, at its offset."""
    tops = {p: 0 for p in range(PARTITIONS)}
    for key, ack in acked.items():
        if key == lost:
            continue
        stored = state.batches.get(key)
        assert stored is not None, f"acknowledged batch {key} ({ack.count} records) is gone"
        assert stored.count == ack.count, (key, stored.count, ack.count)
        assert stored.digest == ack.digest, f"acknowledged batch {key} changed on disk"
        tops[ack.partition] = max(tops[ack.partition], ack.end)
    for partition, top in tops.items():
        assert state.ends[partition] >= top, (partition, state.ends[partition], top)


def record_acks(acked: dict[Key, Ack], acks: list[Ack]) -> None:
    for ack in acks:
        key = (ack.partition, ack.base)
        assert key not in acked, f"offset {key} acknowledged twice: {acked[key]} and {ack}"
        acked[key] = ack


def assert_round_continues(output: RoundOutput, previous_ends: dict[int, int]) -> None:
    """The writer recovered to exactly the ends the check saw, and appended from there."""
    assert output.opens == previous_ends, (output.opens, previous_ends)
    for partition in range(PARTITIONS):
        bases = [a.base for a in output.acks if a.partition == partition]
        if bases:
            # Acknowledgements follow CommitLog order, so the first append of a partition in a
            # round is acknowledged before any later one of that partition.
            assert min(bases) == previous_ends[partition], (partition, min(bases), previous_ends)


def commitlog_segments(data_dir: Path) -> list[int]:
    return segment_starts(StorePaths(data_dir).commitlog)


# ---- tests ----------------------------------------------------------------------------------


def test_sigkill_during_sync_flush_appends_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(20240611)
    acked: dict[Key, Ack] = {}
    ends = {p: 0 for p in range(PARTITIONS)}
    cuts = 0
    for round_no in range(ROUNDS):
        output = run_writer_round(data_dir, 1000 + round_no, rng,
                                  tmp_path / f"writer-{round_no}.stderr")
        assert output.acks, f"round {round_no}: no acknowledgement"
        assert_round_continues(output, ends)
        record_acks(acked, output.acks)
        assert (data_dir / "abort").exists(), "a SIGKILLed store must leave its abort marker"
        state = asyncio.run(read_store(data_dir))
        assert not state.report.clean
        cuts += state.report.cut_at is not None
        assert_acks_intact(state, acked)
        ends = state.ends
    # The run must have covered what it is meant to: segment rolls and several ConsumeQueue files.
    assert len(commitlog_segments(data_dir)) >= 3, commitlog_segments(data_dir)
    cq_files = segment_starts(StorePaths(data_dir).consumequeue_dir(TOPIC, 0))
    assert len(cq_files) >= 2, cq_files
    print(f"{ROUNDS} rounds, {len(acked)} acknowledged batches, {sum(ends.values())} records, "
          f"{len(commitlog_segments(data_dir))} segments, {cuts} torn tails cut")


# ---- torn tail ------------------------------------------------------------------------------


def last_valid_entry(data_dir: Path) -> DispatchRequest:
    """The last CommitLog entry that passes validation, found read-only with the store's parser."""
    queue = MappedFileQueue(StorePaths(data_dir).commitlog, SEGMENT_BYTES)
    queue.load()
    try:
        last = None
        for req in CommitLog(queue, KafkaBodyFormat()).iter_entries(queue.min_offset,
                                                                     check_crc=True):
            last = req
        assert last is not None, "the CommitLog holds no valid entry"
        return last
    finally:
        queue.close()


def corrupt_body_middle(data_dir: Path, entry: DispatchRequest) -> None:
    """Invert 16 bytes in the middle of the entry's batch, inside what its CRC covers."""
    body_len = entry.size - PREFIX_SIZE - len(topic_trailer(TOPIC))
    at = entry.phy_offset + PREFIX_SIZE + body_len // 2
    length = min(16, entry.phy_offset + PREFIX_SIZE + body_len - at)
    segment_start = entry.phy_offset - entry.phy_offset % SEGMENT_BYTES
    path = StorePaths(data_dir).commitlog / offset_file_name(segment_start)
    fd = os.open(path, os.O_RDWR)
    try:
        original = os.pread(fd, length, at - segment_start)
        assert os.pwrite(fd, bytes(b ^ 0xFF for b in original), at - segment_start) == length
    finally:
        os.close(fd)


def recovery_scan_start(data_dir: Path) -> int:
    """Where an unclean start begins validating entries (see engine.recovery.recover)."""
    value = StoreCheckpoint(StorePaths(data_dir).checkpoint).value
    return min(value.commitlog_flushed, value.consumequeue_flushed)


async def append_and_verify(data_dir: Path, ends: dict[int, int]) -> dict[Key, Ack]:
    """Reopen (clean) and append one durable batch per partition, at exactly ``ends``."""
    store = MessageStore(store_config(data_dir), KafkaBodyFormat())
    report = await store.open()
    added: dict[Key, Ack] = {}
    try:
        assert report.clean and report.cut_at is None, report
        for partition in range(PARTITIONS):
            now = int(time.time() * 1000)
            body = bytearray(build_batch([(b"after-crash", b"v%d" % partition, [], now)] * 3))
            result = store.append(TOPIC, partition, memoryview(body), offset_count=3,
                                  max_timestamp=now)
            assert result.status is StoreStatus.OK, result
            assert result.base_offset == ends[partition], (partition, result, ends)
            assert await store.wait_durable(result.phy_end) is StoreStatus.OK
            added[(partition, result.base_offset)] = Ack(
                partition, result.base_offset, 3, hashlib.sha256(body).hexdigest())
    finally:
        await store.close()
    return added


@pytest.mark.timeout(120)
def test_corrupted_last_commitlog_entry_is_cut_at_unclean_start_and_appends_continue(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    output = run_writer_round(data_dir, 7, random.Random(7), tmp_path / "writer.stderr")
    acked: dict[Key, Ack] = {}
    record_acks(acked, output.acks)
    assert (data_dir / "abort").exists(), "a SIGKILLed store must leave its abort marker"

    victim = last_valid_entry(data_dir)
    # Recovery validates entries only from the checkpoint on; data below it counts as durable.
    assert victim.phy_offset >= recovery_scan_start(data_dir), (victim,
                                                                recovery_scan_start(data_dir))
    corrupt_body_middle(data_dir, victim)
    lost = (victim.partition, victim.queue_offset)

    state = asyncio.run(read_store(data_dir))
    assert not state.report.clean
    assert state.report.cut_at == victim.phy_offset, (state.report, victim)
    assert_acks_intact(state, acked, lost=lost)
    # The victim was the newest entry of the whole log, so its partition now ends where it began.
    assert state.ends[victim.partition] == victim.queue_offset, (state.ends, victim)
    assert lost not in state.batches

    added = asyncio.run(append_and_verify(data_dir, state.ends))
    acked = {k: a for k, a in acked.items() if k != lost}
    record_acks(acked, list(added.values()))
    final = asyncio.run(read_store(data_dir))
    assert final.report.clean
    assert_acks_intact(final, acked)
    assert final.ends == {p: state.ends[p] + 3 for p in range(PARTITIONS)}


# ---- crashes at chosen points ---------------------------------------------------------------
# A child process runs one of the functions below; a patched store function calls os._exit at
# the chosen point, which leaves the files exactly as a SIGKILL there would (page cache kept,
# abort marker left, nothing closed). The parent then recovers the store and checks it.

KILLED = 137


def run_crash_child(function: str, data_dir: Path, module: str = __name__) -> RoundOutput:
    """Run ``module.function(str(data_dir))`` in a child that must die with KILLED."""
    code = f"import sys; from {module} import {function}; {function}(sys.argv[1])"
    child = subprocess.run([sys.executable, "-c", code, str(data_dir)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
    output = parse_lines(child.stdout.splitlines(keepends=True), child.returncode, child.stderr)
    assert child.returncode == KILLED, f"{function} was not killed where planned " \
                                       f"(rc {child.returncode}):\n{child.stderr[-4000:]}"
    return output


async def append_acked(store: MessageStore, partition: int, count: int) -> Ack:
    """Append ``count`` small records, wait until durable, print the ACK line like the writer."""
    now = int(time.time() * 1000)
    body = bytearray(build_batch([(None, b"x" * 100, [], now + i) for i in range(count)]))
    result = store.append(TOPIC, partition, memoryview(body), offset_count=count,
                          max_timestamp=now + count - 1)
    assert result.status is StoreStatus.OK, result
    assert await store.wait_durable(result.phy_end) is StoreStatus.OK
    ack = Ack(partition, result.base_offset, count, hashlib.sha256(body).hexdigest())
    print(f"ACK {partition} {ack.base} {count} {ack.digest}", flush=True)
    return ack


async def open_with_topic(data_dir: Path) -> MessageStore:
    store = MessageStore(store_config(data_dir), KafkaBodyFormat())
    await store.open()
    store.create_topic(TOPIC, PARTITIONS)
    return store


def die_while_preallocating_next_segment(data_dir: str) -> None:
    """Child: one acknowledged batch, then die inside the reservation of segment 2's blocks,
    which the allocator starts as soon as segment 1 is taken."""
    from commitgate.engine import mapped_file

    acknowledged = threading.Event()
    reserve = mapped_file._reserve

    def reserve_or_die(fd: int, path: Path, pos: int, length: int) -> None:
        if path.name.startswith(offset_file_name(SEGMENT_BYTES)):
            acknowledged.wait(30)
            os._exit(KILLED)
        reserve(fd, path, pos, length)

    mapped_file._reserve = reserve_or_die

    async def main() -> None:
        store = await open_with_topic(Path(data_dir))
        await append_acked(store, 0, 3)
        acknowledged.set()
        await asyncio.wait_for(asyncio.Event().wait(), 30)  # the allocator thread exits first

    asyncio.run(main())


def die_between_the_consumequeue_files_of_a_batch(data_dir: str) -> None:
    """Child: partition 0 acknowledged up to offset 995, then a 10-record batch whose units
    span two ConsumeQueue files, acknowledged while its units wait in memory; die when they
    are written out, after the first file's units and before the second file."""
    from commitgate.engine.consume_queue import ConsumeQueue

    get_file = ConsumeQueue._file
    armed = False

    def file_or_die(self: ConsumeQueue, index: int, create: bool = False):
        if armed and create and index == 1:
            os._exit(KILLED)
        return get_file(self, index, create)

    ConsumeQueue._file = file_or_die

    async def main() -> None:
        nonlocal armed
        store = await open_with_topic(Path(data_dir))
        for _ in range((CQ_ENTRIES_PER_FILE - 5) // 5):
            await append_acked(store, 0, 5)
        armed = True
        await append_acked(store, 0, 10)
        store.queues.drain()  # as the thorough ConsumeQueue flush does

    asyncio.run(main())


def recovered_and_appendable(data_dir: Path, acked: dict[Key, Ack]) -> StoreState:
    """Recover, check every acknowledged batch, append to every partition, check again."""
    state = asyncio.run(read_store(data_dir))
    assert not state.report.clean
    assert_acks_intact(state, acked)
    added = asyncio.run(append_and_verify(data_dir, state.ends))
    record_acks(acked, list(added.values()))
    final = asyncio.run(read_store(data_dir))
    assert_acks_intact(final, acked)
    assert final.ends == {p: state.ends[p] + 3 for p in range(PARTITIONS)}
    return state


@pytest.mark.timeout(120)
def test_sigkill_while_preallocating_the_next_segment_does_not_stop_the_next_start(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    output = run_crash_child("die_while_preallocating_next_segment", data_dir)
    acked: dict[Key, Ack] = {}
    record_acks(acked, output.acks)
    assert len(acked) == 1
    # A SIGKILL there leaves an unfinished file behind (under whatever name the allocator uses).
    assert any(path.name.startswith(offset_file_name(SEGMENT_BYTES))
               for path in StorePaths(data_dir).commitlog.iterdir())
    state = recovered_and_appendable(data_dir, acked)
    assert state.ends[0] == 3


@pytest.mark.timeout(120)
def test_sigkill_between_the_consumequeue_files_of_a_batch_leaves_consistent_offsets(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    output = run_crash_child("die_between_the_consumequeue_files_of_a_batch", data_dir)
    acked: dict[Key, Ack] = {}
    record_acks(acked, output.acks)
    assert max(a.end for a in acked.values()) == CQ_ENTRIES_PER_FILE + 5
    # The spanning batch is acknowledged and whole in the CommitLog: recovery must index all of
    # it, never only the units that reached the first ConsumeQueue file.
    state = recovered_and_appendable(data_dir, acked)
    assert state.ends[0] == CQ_ENTRIES_PER_FILE + 5, state.ends
