"""SIGKILL during relocation, 20 times at random moments: the view stays correct.

Every round starts ``tests.engine.relocation_writer`` on the same data directory. The driver
appends to ``keep`` (never expires) and ``churn`` (deleted to its end again and again), so the
CommitLog cleaner keeps relocating ``keep``'s batches out of the oldest segments. Once the
round has seen a relocation (the cleaner's counter grew), the test picks a random kill point:
a random number of further output lines, or the next start of a relocation, the next repoint
(units moved, their files not yet synced, the old segment not yet deleted) or the next end of
one; the reader thread sends the SIGKILL as soon as it reads that line, so the kill lands
inside the cleaner's work. The store is then opened in this process (recovery runs here) and
checked against the model built from the driver's output:

- every acknowledged ``keep`` batch is at its offset, byte-identical, ``keep``'s log start
  offsets stay 0 and its offsets chain without gaps up to the log end;
- ``churn`` starts no lower than its last acknowledged DeleteRecords, its offsets chain from
  there, and every acknowledged batch at or after its log start is there, byte-identical;
- the next driver finds exactly the log starts and ends the check found (its clean start
  must not see damaged ConsumeQueue files).

The check then lets the cleaner run in this process until a pass frees nothing, starting from
what the crash left (half-done relocations, unreferenced copies), and asserts the documented
bound, CommitLog segments x size <= factor x live bytes + 3 segments, and an unchanged view.
The driver's own cleaner races its appenders, so the size at a kill is only reported.

After the last kill, a copy of the crashed directory loses ``keep``'s ConsumeQueue
directories: recovery rebuilds them from the whole CommitLog, meeting relocated copies (and
copies of copies, and dead originals) out of offset order, and must show the same batches,
continue appends at the same ends and show them all again after a clean restart. Last, the
disk holds far less than was written.

A SIGKILL keeps the page cache, so this exercises the order of the cleaner's steps in memory
and in the files (copy, repoint, delete) and recovery's replay of copies, not the fsyncs.
"""
from __future__ import annotations

import asyncio
import hashlib
import random
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

import pytest

from commitgate.engine import MessageStore, StoreStatus
from commitgate.engine.mapped_file_queue import segment_starts
from commitgate.engine.paths import StorePaths
from commitgate.engine.recovery import RecoveryReport
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch
from tests.engine.relocation_writer import CHURN, KEEP, PARTITIONS, SEGMENT_BYTES, store_config
from tests.engine.test_crash_recovery import (
    LineCollector,
    StoredBatch,
    read_batches,
    run_until_killed,
)

ROUNDS = 20
SEED = 20240707
RELOCATION_TIMEOUT_S = 30.0  # interpreter start + store open + recovery + the first relocation
KILL_POINT_TIMEOUT_S = 10.0  # after the first relocation, for the chosen kill line
MAX_EXTRA_LINES = 1500
MAX_NTH = 6
KILL_MODES = ("lines", "RELOC_BEGIN", "repoint", "RELOC_END")
CHECK_INTERVAL_MS = 3_600_000  # the checker's store runs no retention pass of its own
SETTLE_PASSES = 20  # cleaner passes at most, each deleting at least one segment

Partition = tuple[str, int]  # (topic, partition)
Key = tuple[str, int, int]  # (topic, partition, base offset)
Output = TypeVar("Output")  # what a driver's output is parsed into


@dataclass(frozen=True)
class Ack:
    topic: str
    partition: int
    base: int
    count: int
    size: int
    digest: str

    @property
    def key(self) -> Key:
        return self.topic, self.partition, self.base


@dataclass
class KillPlan:
    mode: str  # one of KILL_MODES
    lines: int  # "lines": kill after this many lines following the first relocation
    nth: int  # the other modes: kill at the nth such line after the first relocation

    @classmethod
    def for_round(cls, round_no: int, modes: tuple[str, ...], rng: random.Random) -> KillPlan:
        """Round ``round_no``'s plan: the modes in turn, the numbers drawn from ``rng``."""
        return cls(modes[round_no % len(modes)], rng.randint(1, MAX_EXTRA_LINES),
                   rng.randint(1, MAX_NTH))


@dataclass
class RoundOutput:
    opens: dict[Partition, tuple[int, int]]  # (log start, log end) the driver saw after opening
    acks: list[Ack]
    deletes: dict[int, int]  # churn partition -> highest log start a DeleteRecords returned
    relocated_entries: int  # the driver's cleaner counters when it was killed
    deleted_segments: int
    relocations_begun: int
    relocations_ended: int
    kill_line: str  # the line the kill followed ("" when the plan's line never came)
    returncode: int
    stderr: str


@dataclass
class StoreState:
    report: RecoveryReport
    batches: dict[Key, StoredBatch] = field(default_factory=dict)
    starts: dict[Partition, int] = field(default_factory=dict)
    ends: dict[Partition, int] = field(default_factory=dict)
    keep_bytes: int = 0  # bytes of keep's CommitLog entries (what the cleaner must keep)


def all_partitions() -> list[Partition]:
    return [(topic, p) for topic, count in PARTITIONS.items() for p in range(count)]


# ---- running the driver ---------------------------------------------------------------------


class KillingCollector(LineCollector):
    """Drains the driver's stdout and SIGKILLs it right when it reads the plan's line, which
    puts the kill a pipe's latency after the driver printed it. Its first event (``relocated``)
    is the first relocation, a growth of the relocated entries counter of a STATS line; the
    mode "repoint" kills at such a growth (test_compaction_crash's subclass keys both on the
    compactor's counters instead)."""

    GROWTH_MODES: tuple[str, ...] = ("repoint",)  # plan modes hit by a counter's growth

    def __init__(self, proc: subprocess.Popen, stream: IO[str], plan: KillPlan) -> None:
        super().__init__(stream)
        self.proc = proc
        self.plan = plan
        self.relocated = threading.Event()  # set at the first relocation, or at EOF
        self.killed = threading.Event()  # set at the kill, or at EOF
        self.kill_line = ""
        self._after = 0  # lines since the first relocation
        self._hits = 0
        self.entries = 0  # the cleaner's relocated_entries as last printed

    def step(self, line: str) -> None:
        if not self.killed.is_set():
            self._step(line)

    def ended(self) -> None:
        self.relocated.set()
        self.killed.set()

    def _grew(self, fields: list[str]) -> set[str]:
        """The growth modes a STATS line's counters hit."""
        entries = int(fields[0])
        grew, self.entries = entries > self.entries, entries
        return {"repoint"} if grew else set()

    def _step(self, line: str) -> None:
        kind, *fields = line.split()
        grew = self._grew(fields) if kind == "STATS" else set()
        if not self.relocated.is_set():
            if grew:
                self.relocated.set()
            return
        self._after += 1
        plan = self.plan
        if plan.mode == "lines":
            hit = self._after >= plan.lines
        elif plan.mode in self.GROWTH_MODES:
            hit = plan.mode in grew
        else:
            hit = kind == plan.mode
        self._hits += hit
        if hit and (plan.mode == "lines" or self._hits >= plan.nth):
            self.proc.kill()
            self.kill_line = line.strip()
            self.killed.set()


def parse_lines(lines: list[str], kill_line: str, returncode: int, stderr: str) -> RoundOutput:
    output = RoundOutput({}, [], {}, 0, 0, 0, 0, kill_line, returncode, stderr)
    for line in lines:
        kind, *fields = line.split()
        if kind == "OPEN":
            output.opens[(fields[0], int(fields[1]))] = (int(fields[2]), int(fields[3]))
        elif kind == "ACK":
            output.acks.append(Ack(fields[0], int(fields[1]), int(fields[2]), int(fields[3]),
                                   int(fields[4]), fields[5]))
        elif kind == "DEL":
            partition, start = int(fields[0]), int(fields[1])
            output.deletes[partition] = max(output.deletes.get(partition, 0), start)
        elif kind == "STATS":
            output.relocated_entries, output.deleted_segments = int(fields[0]), int(fields[2])
        elif kind == "RELOC_BEGIN":
            output.relocations_begun += 1
        elif kind == "RELOC_END":
            output.relocations_ended += 1
    return output


def run_driver_round(data_dir: Path, seed: int, plan: KillPlan, stderr_path: Path, *,
                     module: str = "tests.engine.relocation_writer",
                     collector: type[KillingCollector] = KillingCollector,
                     parse: Callable[[list[str], str, int, str], Output] = parse_lines,
                     first: str = "relocated", first_timeout_s: float = RELOCATION_TIMEOUT_S
                     ) -> Output:
    """Start the driver (``module``), SIGKILL it at the plan's line after the first event its
    ``collector`` waits for (``first``: what the driver has then done; by default its first
    relocation), or when that line does not come in time; ``parse`` its output."""
    def at_the_plans_line(proc: subprocess.Popen, watcher: KillingCollector) -> bool:
        started = watcher.relocated.wait(first_timeout_s) and watcher.entries > 0
        if started:
            watcher.killed.wait(KILL_POINT_TIMEOUT_S)
        return started

    child = run_until_killed(module, data_dir, seed, stderr_path,
                             lambda proc: collector(proc, proc.stdout, plan), at_the_plans_line)
    output = parse(child.collector.lines, child.collector.kill_line, child.returncode,
                   child.stderr)
    assert child.reached, f"driver (seed {seed}) {first} nothing in {first_timeout_s}s or " \
                          f"exited early (rc {child.returncode}):\n{output.stderr[-4000:]}"
    assert child.returncode == -9, f"driver ended by itself (rc {child.returncode}):\n" \
                                   f"{output.stderr[-4000:]}"
    return output


# ---- checking the store ---------------------------------------------------------------------


def read_partition(store: MessageStore, topic: str, partition: int
                   ) -> tuple[dict[Key, StoredBatch], int, int]:
    """Every batch from the log start to the log end, asserting that base offsets chain;
    returns them with the log start and end."""
    start = store.log_start_offset(topic, partition)
    end = store.log_end_offset(topic, partition)
    assert 0 <= start <= end, (topic, partition, start, end)
    batches = read_batches(store, topic, partition, start, end)
    return {(topic, partition, base): batch for base, batch in batches.items()}, start, end


async def read_all(store: MessageStore, report: RecoveryReport) -> StoreState:
    state = StoreState(report)
    for topic, partition in all_partitions():
        batches, start, end = read_partition(store, topic, partition)
        state.batches.update(batches)
        state.starts[(topic, partition)], state.ends[(topic, partition)] = start, end
    state.keep_bytes = sum([await store.partition_size(KEEP, p) for p in range(PARTITIONS[KEEP])])
    return state


def checker_store(data_dir: Path) -> MessageStore:
    return MessageStore(store_config(data_dir, retention_check_interval_ms=CHECK_INTERVAL_MS),
                        KafkaBodyFormat())


async def read_store(data_dir: Path) -> StoreState:
    """Open the store (recovery happens here), read every partition, close it cleanly."""
    store = checker_store(data_dir)
    report = await store.open()
    try:
        return await read_all(store, report)
    finally:
        await store.close()


async def check_and_settle(data_dir: Path, acked: dict[Key, Ack], deleted: dict[int, int]
                           ) -> tuple[StoreState, int]:
    """Open the crashed store (recovery happens here) and check it against the model; then
    run cleaner passes until one frees nothing (the cleaner starting from what the crash
    left), check the documented bound on the CommitLog and that the view did not change.
    Returns the state and the CommitLog's segments once settled."""
    store = checker_store(data_dir)
    report = await store.open()
    try:
        state = await read_all(store, report)
        assert not report.clean
        assert_view_correct(state, acked, deleted)
        for _ in range(SETTLE_PASSES):
            if not await store.retention.run_once():
                break
        segments = len(store.commit_log.queue.files)
        live = sum([await store.partition_size(topic, p) for topic, p in all_partitions()])
        bound = store.config.cleaner_garbage_factor * live + 3 * SEGMENT_BYTES
        assert segments * SEGMENT_BYTES <= bound, \
            f"{segments} segments after the cleaner settled, {live} bytes live"
        settled = await read_all(store, report)
        assert settled.batches == state.batches, "the cleaner changed the view"
        assert (settled.starts, settled.ends) == (state.starts, state.ends)
    finally:
        await store.close()
    return state, segments


def assert_view_correct(state: StoreState, acked: dict[Key, Ack], deleted: dict[int, int]
                        ) -> None:
    """The model: every acknowledged keep batch, and every acknowledged churn batch not
    deleted, is stored byte-identical at its offset; keep starts at 0; churn starts no lower
    than its last acknowledged DeleteRecords."""
    for partition in range(PARTITIONS[KEEP]):
        assert state.starts[(KEEP, partition)] == 0, \
            f"{KEEP}-{partition}: log start {state.starts[(KEEP, partition)]}, nothing was deleted"
    for partition in range(PARTITIONS[CHURN]):
        start = state.starts[(CHURN, partition)]
        assert start >= deleted.get(partition, 0), \
            f"{CHURN}-{partition}: log start {start} below the acknowledged DeleteRecords " \
            f"{deleted[partition]}: deleted records came back"
    missing = []
    for key, ack in acked.items():
        if ack.base < state.starts[(ack.topic, ack.partition)]:
            continue  # deleted (churn only: keep starts at 0)
        stored = state.batches.get(key)
        if stored is None:
            missing.append(ack)
            continue
        assert stored.count == ack.count, (key, stored.count, ack.count)
        assert stored.digest == ack.digest, f"acknowledged batch {key} changed on disk"
    assert not missing, f"{len(missing)} acknowledged batches are gone, the first: " \
                        f"{sorted(missing, key=lambda a: a.key)[:5]}"
    for ack in acked.values():
        assert state.ends[(ack.topic, ack.partition)] >= ack.base + ack.count, \
            (ack, state.ends[(ack.topic, ack.partition)])


def record_acks(acked: dict[Key, Ack], acks: list[Ack]) -> None:
    for ack in acks:
        assert ack.key not in acked, f"offset {ack.key} acknowledged twice: {acked[ack.key]} " \
                                     f"and {ack}"
        acked[ack.key] = ack


def assert_round_continues(output: RoundOutput, state: StoreState | None) -> None:
    """The driver opened the store exactly as the last check left it, and appended from the
    ends that check found."""
    if state is None:
        expected = {key: (0, 0) for key in all_partitions()}
    else:
        expected = {key: (state.starts[key], state.ends[key]) for key in all_partitions()}
    assert_opened_as_checked(output.opens, expected, output.stderr)
    for topic, partition in all_partitions():
        bases = [a.base for a in output.acks if (a.topic, a.partition) == (topic, partition)]
        if bases:
            # Acknowledgements follow CommitLog order, so a partition's first append of a
            # round is acknowledged before any later one of it.
            assert min(bases) == expected[(topic, partition)][1], \
                (topic, partition, min(bases), expected)


def assert_opened_as_checked(opens: dict[Partition, tuple[int, int]],
                             expected: dict[Partition, tuple[int, int]], stderr: str) -> None:
    """The driver's start found (OPEN lines) the (log start, log end) of every partition that
    the check which closed the store cleanly before it found."""
    changed = {key: (opens.get(key), value) for key, value in expected.items()
               if opens.get(key) != value}
    assert not changed, f"the driver's start found other (log start, log end) than the check " \
                        f"that closed the store cleanly before it, (found, checked): {changed}; " \
                        f"driver stderr:\n{stderr[-3000:]}"


def commitlog_segments(data_dir: Path) -> int:
    return len(segment_starts(StorePaths(data_dir).commitlog))


def keep_views(state: StoreState) -> dict[Key, StoredBatch]:
    return {key: batch for key, batch in state.batches.items() if key[0] == KEEP}


# ---- after the last kill --------------------------------------------------------------------


def assert_rebuild_matches(crashed: Path, expected: StoreState, acked: dict[Key, Ack]) -> None:
    """Recovery of the crashed directory without keep's ConsumeQueues rebuilds them from the
    CommitLog (copies met out of offset order) into the same batches; appends continue at the
    same ends; a clean restart shows it all again."""
    for partition in range(PARTITIONS[KEEP]):
        shutil.rmtree(StorePaths(crashed).consumequeue_dir(KEEP, partition))
    rebuilt = asyncio.run(read_store(crashed))
    assert not rebuilt.report.clean
    assert sorted(rebuilt.report.rebuilt_partitions) == \
        [(KEEP, p) for p in range(PARTITIONS[KEEP])], rebuilt.report
    assert keep_views(rebuilt) == keep_views(expected)
    assert rebuilt.ends == expected.ends and rebuilt.starts == expected.starts
    assert_view_correct(rebuilt, acked, {})
    added = asyncio.run(append_one_per_keep_partition(crashed, rebuilt.ends))
    again = asyncio.run(read_store(crashed))
    assert again.report.clean
    assert_view_correct(again, {**acked, **added}, {})
    for partition in range(PARTITIONS[KEEP]):
        assert again.ends[(KEEP, partition)] == rebuilt.ends[(KEEP, partition)] + 2


async def append_one_per_keep_partition(data_dir: Path, ends: dict[Partition, int]
                                        ) -> dict[Key, Ack]:
    store = checker_store(data_dir)
    await store.open()
    added: dict[Key, Ack] = {}
    try:
        for partition in range(PARTITIONS[KEEP]):
            body = bytearray(build_batch([(b"after-rebuild", b"v%d" % partition, [], 1_000)] * 2))
            result = store.append(KEEP, partition, memoryview(body), offset_count=2,
                                  max_timestamp=1_000)
            assert result.status is StoreStatus.OK, result
            assert result.base_offset == ends[(KEEP, partition)], (partition, result, ends)
            assert await store.wait_durable(result.phy_end) is StoreStatus.OK
            ack = Ack(KEEP, partition, result.base_offset, 2, len(body),
                      hashlib.sha256(body).hexdigest())
            added[ack.key] = ack
    finally:
        await store.close()
    return added


# ---- the test -------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_sigkill_during_relocation_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(SEED)
    acked: dict[Key, Ack] = {}
    deleted: dict[int, int] = {}
    state: StoreState | None = None
    relocated = relocations = written = most_segments = 0
    kills: dict[str, int] = {}
    for round_no in range(ROUNDS):
        plan = KillPlan.for_round(round_no, KILL_MODES, rng)
        output = run_driver_round(data_dir, SEED + round_no, plan,
                                  tmp_path / f"driver-{round_no}.stderr")
        context = f"round {round_no}, {plan}, killed after {output.kill_line!r}"
        assert output.relocated_entries > 0, context
        try:
            assert_round_continues(output, state)
        except AssertionError as exc:
            raise AssertionError(f"{context}: {exc}") from exc
        record_acks(acked, output.acks)
        for partition, start in output.deletes.items():
            deleted[partition] = max(deleted.get(partition, 0), start)
        relocated += output.relocated_entries
        relocations += output.relocations_begun
        written += sum(ack.size for ack in output.acks)
        kind = output.kill_line.split(" ", 1)[0] or "late"
        kills[kind] = kills.get(kind, 0) + 1
        most_segments = max(most_segments, commitlog_segments(data_dir))
        assert (data_dir / "abort").exists(), "a SIGKILLed store must leave its abort marker"
        crashed_copy = None
        if round_no == ROUNDS - 1:  # the rebuild below starts from this very crash
            crashed_copy = tmp_path / "rebuild"
            shutil.copytree(data_dir, crashed_copy)
        try:
            state, segments = asyncio.run(check_and_settle(data_dir, acked, deleted))
        except AssertionError as exc:
            raise AssertionError(f"{context}: {exc}") from exc
        if crashed_copy is not None:
            assert_rebuild_matches(crashed_copy, state, acked)

    keep_batches = sum(1 for key in acked if key[0] == KEEP)
    summary = (f"{ROUNDS} rounds, {len(acked)} acknowledged batches ({keep_batches} keep), "
               f"{written >> 20} MiB written, {relocations} relocations begun, {relocated} "
               f"entries relocated, kills after {kills}, at most {most_segments} segments at a "
               f"kill, {segments} once settled, keep {state.keep_bytes} bytes")
    print(summary)
    # The run covered what it is meant to: relocations in every round (asserted per round),
    # many entries moved.
    assert relocated >= 10 * ROUNDS, summary
    # What the disk holds is bounded by what lives, not by what was written.
    assert segments * SEGMENT_BYTES * 4 < written, summary
    final = asyncio.run(read_store(data_dir))
    assert final.report.clean
    assert final.batches == state.batches
