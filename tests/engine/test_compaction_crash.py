"""SIGKILL during cleaning, 20 times at random moments: the view stays correct, nothing that
must survive is missing (checked against a model of what was produced).

Every round starts ``tests.engine.compaction_writer`` on the same data directory. It appends
keyed records (keys from a small key space, some tombstones) to ``compacted``
(cleanup.policy=compact, min.cleanable.dirty.ratio 0.01, tombstones kept) while a retention
pass every 20 ms lets the LogCompactor clean it constantly, and appends to ``churn``, deleted
to its end again and again, so that the CommitLog cleaner relocates the compacted partition's
entries (originals and cleaned copies) too. The driver announces every compacted batch before
appending it (SEND: base offset, each record's key and value digest) and acknowledges it once
durable (ACK). Once the round has seen a compaction (the compactor's counters grew), the test
picks a kill point: a random number of further lines, the next growth of the rewritten or the
dropped batches counter (a chunk of cleaned batches was appended and waits for its sync), the
next start of a chunk's sync-and-point (APPLY_BEGIN), its end (units pointed, their files not
synced, the cleaner checkpoint not moved), the end of a cleaning, or the start of a relocation.
The reader thread sends the SIGKILL as soon as it reads that line.

The store is then opened in this process (recovery runs here) and the compacted partitions are
read from their log start with ``store.read`` and ``decode_records``; against the model:

- the log start is 0; the log end is at least the end of the last acknowledged batch and falls
  on the end of an announced batch (unacknowledged batches that survived are whole);
- every record returned is exactly the one produced at its offset (key and value digest), and
  offsets strictly increase; a read at any offset (a removed one too) starts with the record
  the view from the log start has next there;
- for every key, the last record the store holds (acknowledged, or announced and surviving
  below the log end: a later record of the key that compaction saw) is present at its offset
  (a tombstone too: delete.retention.ms is huge).

Then a copy of the directory is cleaned in this process until compaction settles, and the view
must be exactly the last record of every key below the partition's last batch plus the whole
last batch (which is never cleaned, so records it supersedes stay): whatever a crash left
(records brought back by recovery included) the next cleaning removes. After the last round the
same is asserted on the directory itself, and on two rebuilds (the compacted ConsumeQueue
directories deleted), of the settled directory and of the last crash: a rebuild may bring back
removed records whose entries are still on disk, each at its own offset (the checks above
allow that), and the next cleaning removes them again.

Every driver's stderr must be free of failed retention passes: a pass that raises skips the
cleaner's work and loses the log start moves it had taken, so the test would not exercise
what it claims. That check comes last, after every view was checked.

A SIGKILL keeps the page cache, so this exercises the order of the compactor's and the
cleaner's steps (append, sync, point, checkpoint, delete) and recovery's replay of their
copies, not the fsyncs.
"""
from __future__ import annotations

import asyncio
import itertools
import random
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from commitgate.engine import MessageStore, StoreStatus
from commitgate.engine.paths import StorePaths
from commitgate.protocol.record_batch import decode_records
from tests.engine.compaction_writer import (
    CHURN,
    COMPACTED,
    COMPACTED_PARTITIONS,
    PARTITIONS,
    value_digest,
)
from tests.engine.test_crash_recovery import READ_CHUNK
from tests.engine.test_relocation_crash import (
    ROUNDS,
    KillingCollector,
    KillPlan,
    assert_opened_as_checked,
    checker_store,
    commitlog_segments,
    run_driver_round,
)

SEED = 20240811
COMPACTION_TIMEOUT_S = 30.0  # interpreter start + store open + the first compaction
KILL_MODES = ("lines", "rewrite", "APPLY_BEGIN", "dropped", "APPLY_END", "lines", "CLEAN_END",
              "RELOC_BEGIN")
SETTLE_PASSES = 10  # retention passes at most until a pass cleans nothing
FAILED_PASS = "retention pass failed"
EXCEPTION_LINE = re.compile(r"^\w+(Error|Exception)\b")  # a traceback's last line

RecordView = tuple[int, str, str]  # (offset, key, value digest)


# ---- the model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    partition: int
    base: int
    records: tuple[tuple[str, str], ...]  # (key, value digest) of each record in order

    @property
    def end(self) -> int:
        return self.base + len(self.records)


@dataclass
class PartitionModel:
    """What was produced to one compacted partition and may be in the store: every batch
    announced below the log end the last check found, plus the current round's."""

    batches: dict[int, Sent] = field(default_factory=dict)  # base offset -> batch
    acked: set[int] = field(default_factory=set)  # base offsets acknowledged
    end: int = 0  # the log end the last check found
    top: int = 0  # the end of the last batch announced

    def add(self, sent: Sent) -> None:
        assert sent.base == self.top, f"batch announced at {sent.base}, the model ends at " \
                                      f"{self.top}: {sent}"
        self.batches[sent.base] = sent
        self.top = sent.end

    def acked_end(self) -> int:
        return max((self.batches[base].end for base in self.acked), default=0)

    def records(self, below: int) -> dict[int, tuple[str, str]]:
        return {batch.base + i: record for batch in self.batches.values()
                for i, record in enumerate(batch.records) if batch.base + i < below}

    def must_survive(self, end: int) -> dict[str, int]:
        """Each key's last offset among the records the store holds below ``end``."""
        last: dict[str, int] = {}
        for offset, (key, _) in sorted(self.records(end).items()):
            last[key] = offset
        return last

    def settled(self, end: int) -> list[RecordView]:
        """The view once compaction settled: the last record of every key below the last
        batch, and the whole last batch (never cleaned)."""
        records = self.records(end)
        if not records:
            return []
        last_base = max(base for base in self.batches if base < end)
        last: dict[str, int] = {}
        for offset, (key, _) in sorted(records.items()):
            if offset < last_base:
                last[key] = offset
        kept = sorted(set(last.values()) | {o for o in records if o >= last_base})
        return [(offset, *records[offset]) for offset in kept]

    def prune(self, end: int) -> None:
        """Forget the batches the store does not hold (announced, never made durable)."""
        for base, batch in list(self.batches.items()):
            if base >= end:
                assert base not in self.acked, f"acknowledged batch {batch} is past the log " \
                                               f"end {end}"
                del self.batches[base]
            else:
                assert batch.end <= end, f"the log end {end} cuts batch {batch}"
        self.end = self.top = end


# ---- running the driver ---------------------------------------------------------------------


@dataclass
class RoundOutput:
    opens: dict[tuple[str, int], tuple[int, int]]
    sends: list[Sent]
    acks: list[tuple[int, int, int]]  # (partition, base, records)
    counts: Counter
    stats: tuple[int, ...]  # the last STATS line's numbers
    kill_line: str
    returncode: int
    stderr: str


class CompactionKillingCollector(KillingCollector):
    """KillingCollector keyed on the compactor: its ``relocated`` event is set at the round's
    first compaction (the rewritten or dropped batches counter grew), ``entries`` counts both,
    and the modes "rewrite" / "dropped" kill at a growth of that counter."""

    GROWTH_MODES = ("rewrite", "dropped")

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.rewritten = self.dropped = 0

    def _grew(self, fields: list[str]) -> set[str]:
        rewritten, dropped = int(fields[0]), int(fields[1])
        grew = set()
        if rewritten > self.rewritten:
            grew.add("rewrite")
        if dropped > self.dropped:
            grew.add("dropped")
        self.rewritten, self.dropped = rewritten, dropped
        self.entries = rewritten + dropped
        return grew


def parse_lines(lines: list[str], kill_line: str, returncode: int, stderr: str) -> RoundOutput:
    output = RoundOutput({}, [], [], Counter(), (), kill_line, returncode, stderr)
    for line in lines:
        kind, *fields = line.split()
        output.counts[kind] += 1
        if kind == "OPEN":
            output.opens[(fields[0], int(fields[1]))] = (int(fields[2]), int(fields[3]))
        elif kind == "SEND":
            records = tuple(tuple(item.split("=")) for item in fields[3:])
            assert len(records) == int(fields[2]), line
            output.sends.append(Sent(int(fields[0]), int(fields[1]), records))
        elif kind == "ACK":
            output.acks.append((int(fields[0]), int(fields[1]), int(fields[2])))
        elif kind == "STATS":
            output.stats = tuple(map(int, fields))
    return output


def run_compaction_round(data_dir: Path, seed: int, plan: KillPlan, stderr_path: Path
                         ) -> RoundOutput:
    """Start the driver, SIGKILL it at the plan's line after its first compaction (or when
    that line does not come in time), collect its output."""
    return run_driver_round(data_dir, seed, plan, stderr_path,
                            module="tests.engine.compaction_writer",
                            collector=CompactionKillingCollector, parse=parse_lines,
                            first="compacted", first_timeout_s=COMPACTION_TIMEOUT_S)


# ---- checking the store ---------------------------------------------------------------------


def read_view(store: MessageStore, partition: int, offset: int = 0, limit: int | None = None,
              *, max_bytes: int = READ_CHUNK) -> list[RecordView]:
    """Every record from ``offset`` to the log end (or the first ``limit`` ones), as a
    consumer fetching from there sees them (records of the first batch below ``offset`` left
    out)."""
    end = store.log_end_offset(COMPACTED, partition)
    view: list[RecordView] = []
    while offset < end and (limit is None or len(view) < limit):
        result = store.read(COMPACTED, partition, offset, max_bytes)
        assert result.status is StoreStatus.OK, (partition, offset, end, result.status)
        assert result.buffers, f"{COMPACTED}-{partition}: no batch at {offset} below the log " \
                               f"end {end}"
        for buffer in result.buffers:
            data = bytes(buffer)
            buffer.release()  # a view into the mapped segment would keep it open at close
            view += [(r.offset, r.key.decode(), value_digest(r.value))
                     for r in decode_records(data) if r.offset >= offset]
        assert result.next_offset > offset, (partition, offset, result.next_offset)
        offset = result.next_offset
    return view


def assert_view_correct(store: MessageStore, models: list[PartitionModel]
                        ) -> dict[int, list[RecordView]]:
    """The checks of a crashed (or rebuilt) store against the model; returns the views."""
    views = {}
    for partition, model in enumerate(models):
        where = f"{COMPACTED}-{partition}"
        start = store.log_start_offset(COMPACTED, partition)
        end = store.log_end_offset(COMPACTED, partition)
        assert start == 0, f"{where}: log start {start}: nothing was deleted"
        assert end >= model.acked_end(), \
            f"{where}: log end {end} below the last acknowledged batch's end {model.acked_end()}"
        ends = {batch.end for batch in model.batches.values()} | {0}
        assert end in ends, f"{where}: log end {end} is no announced batch's end"
        produced = model.records(end)
        view = read_view(store, partition)
        offsets = [offset for offset, _, _ in view]
        assert all(a < b for a, b in itertools.pairwise(offsets)), \
            f"{where}: offsets do not strictly increase: {offsets[:200]}"
        wrong = [(record, produced.get(record[0])) for record in view
                 if produced.get(record[0]) != record[1:]]
        assert not wrong, f"{where}: {len(wrong)} records differ from what was produced at " \
                          f"their offsets, (read, produced): {wrong[:10]}"
        present = set(offsets)
        missing = {key: offset for key, offset in model.must_survive(end).items()
                   if offset not in present}
        assert not missing, f"{where}: the last records of {len(missing)} keys are gone " \
                            f"(key: offset): {dict(sorted(missing.items())[:20])}"
        assert_reads_continue(store, partition, view)
        views[partition] = view
    return views


def assert_reads_continue(store: MessageStore, partition: int, view: list[RecordView]) -> None:
    """A fetch at any offset (removed ones included) starts with the record the view from the
    log start has next there: the units of a batch's offsets (and of the removed offsets
    before it) all point at the one entry it has now. One-batch reads, so this is cheap."""
    end = store.log_end_offset(COMPACTED, partition)
    following = 0  # index in ``view`` of the first record at or after ``offset``
    for offset in range(end):
        while following < len(view) and view[following][0] < offset:
            following += 1
        there = read_view(store, partition, offset, 1, max_bytes=1)[:1]
        expected = view[following:following + 1]
        assert there == expected, \
            f"{COMPACTED}-{partition}: a read at offset {offset} starts with {there}, the read " \
            f"from the log start has {expected} next there: the units of one batch's offsets " \
            f"point at different entries"


async def settle(store: MessageStore) -> None:
    """Retention passes until one cleans nothing."""
    compactor = store.retention.compactor
    for _ in range(SETTLE_PASSES):
        before = compactor.cleaned_partitions
        await store.retention.run_once()
        if compactor.cleaned_partitions == before:
            return
    raise AssertionError(f"compaction still cleaning after {SETTLE_PASSES} passes")


def assert_settled(store: MessageStore, models: list[PartitionModel]) -> None:
    for partition, model in enumerate(models):
        view = read_view(store, partition)
        expected = model.settled(store.log_end_offset(COMPACTED, partition))
        extra = sorted(set(view) - set(expected))
        missing = sorted(set(expected) - set(view))
        assert view == expected, \
            f"{COMPACTED}-{partition}: once compaction settled the view holds {len(extra)} " \
            f"records it should not (first: {extra[:10]}) and lacks {len(missing)} (first: " \
            f"{missing[:10]})"


@dataclass
class CheckResult:
    ends: dict[int, int]  # compacted partition -> log end
    churn: dict[int, tuple[int, int]]  # churn partition -> (log start, log end)
    rebuilt: list[tuple[str, int]]
    clean: bool


async def check_store(data_dir: Path, models: list[PartitionModel], *,
                      settle_first: bool = False) -> CheckResult:
    """Open the store (recovery happens here), check the views (after settling them when
    ``settle_first``, then exactly), close it cleanly."""
    store = checker_store(data_dir)
    report = await store.open()
    try:
        if settle_first:
            await settle(store)
            assert_settled(store, models)
        assert_view_correct(store, models)
        return CheckResult(
            {p: store.log_end_offset(COMPACTED, p) for p in range(COMPACTED_PARTITIONS)},
            {p: (store.log_start_offset(CHURN, p), store.log_end_offset(CHURN, p))
             for p in range(PARTITIONS[CHURN])},
            report.rebuilt_partitions, report.clean)
    finally:
        await store.close()


def settle_copy(data_dir: Path, scratch: Path, models: list[PartitionModel]) -> None:
    """Clean a copy of the directory until compaction settles; the view must be exact."""
    shutil.copytree(data_dir, scratch)
    try:
        asyncio.run(check_store(scratch, models, settle_first=True))
    finally:
        shutil.rmtree(scratch)


def rebuild_and_check(data_dir: Path, models: list[PartitionModel], ends: dict[int, int]
                      ) -> None:
    """Without the compacted partitions' ConsumeQueues, recovery rebuilds them from the whole
    CommitLog: the view passes the crash checks at the same ends, and once compaction settled
    it is exact again, also after a clean restart."""
    for partition in range(COMPACTED_PARTITIONS):
        shutil.rmtree(StorePaths(data_dir).consumequeue_dir(COMPACTED, partition))
    rebuilt = asyncio.run(check_store(data_dir, models))
    assert sorted(rebuilt.rebuilt) == \
        [(COMPACTED, p) for p in range(COMPACTED_PARTITIONS)], rebuilt
    assert rebuilt.ends == ends, (rebuilt.ends, ends)
    asyncio.run(check_store(data_dir, models, settle_first=True))
    again = asyncio.run(check_store(data_dir, models, settle_first=True))
    assert again.clean and again.ends == ends


def assert_round_continues(output: RoundOutput, models: list[PartitionModel],
                           last: CheckResult | None) -> None:
    """The driver opened the store as the last check left it and announced its batches from
    the ends that check found."""
    expected = {(COMPACTED, p): (0, model.end) for p, model in enumerate(models)}
    expected.update({(CHURN, p): last.churn[p] if last else (0, 0)
                     for p in range(PARTITIONS[CHURN])})
    assert_opened_as_checked(output.opens, expected, output.stderr)


def record_round(output: RoundOutput, models: list[PartitionModel]) -> None:
    for sent in output.sends:
        models[sent.partition].add(sent)
    for partition, base, count in output.acks:
        sent = models[partition].batches.get(base)
        assert sent is not None and len(sent.records) == count, \
            f"ACK {partition} {base} {count} of no announced batch ({sent})"
        models[partition].acked.add(base)


# ---- the test -------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_sigkill_during_compaction_keeps_the_last_record_of_every_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(SEED)
    models = [PartitionModel() for _ in range(COMPACTED_PARTITIONS)]
    last: CheckResult | None = None
    kills: Counter = Counter()
    totals: Counter = Counter()
    failed_passes: list[str] = []
    most_segments = 0
    crashed_copy = tmp_path / "last-crash"
    for round_no in range(ROUNDS):
        plan = KillPlan.for_round(round_no, KILL_MODES, rng)
        output = run_compaction_round(data_dir, SEED + round_no, plan,
                                      tmp_path / f"driver-{round_no}.stderr")
        context = f"round {round_no}, {plan}, killed after {output.kill_line!r}"
        try:
            assert_round_continues(output, models, last)
            record_round(output, models)
        except AssertionError as exc:
            raise AssertionError(f"{context}: {exc}") from exc
        failed_passes += [f"round {round_no}: {line}" for line in output.stderr.splitlines()
                          if FAILED_PASS in line or EXCEPTION_LINE.match(line)]
        kills[output.kill_line.split(" ", 1)[0] or "late"] += 1
        totals.update({"rewritten": output.stats[0], "dropped": output.stats[1],
                       "cleanings": output.stats[2], "relocated": output.stats[3],
                       "acks": len(output.acks), "sends": len(output.sends)})
        totals.update({kind: output.counts[kind] for kind in ("RELOC_BEGIN", "APPLY_BEGIN")})
        most_segments = max(most_segments, commitlog_segments(data_dir))
        assert (data_dir / "abort").exists(), "a SIGKILLed store must leave its abort marker"
        # The crash as it was, kept for the rebuild after the last round (and for a look at
        # a failure: pytest keeps tmp_path).
        shutil.rmtree(crashed_copy, ignore_errors=True)
        shutil.copytree(data_dir, crashed_copy)
        stage = "checking the crashed store"
        try:
            last = asyncio.run(check_store(data_dir, models))
            assert not last.clean
            for partition, model in enumerate(models):
                model.prune(last.ends[partition])
            stage = "cleaning a copy of the recovered store until compaction settled"
            settle_copy(data_dir, tmp_path / "settle", models)
        except AssertionError as exc:
            raise AssertionError(f"{context}, {stage} (the crashed directory: {crashed_copy})"
                                 f": {exc}") from exc

    summary = (f"{ROUNDS} rounds, {dict(totals)}, kills after {dict(kills)}, at most "
               f"{most_segments} CommitLog segments at a kill, compacted ends {last.ends}")
    print(summary)
    # What the run is meant to cover: much cleaning, relocation beside it.
    assert totals["rewritten"] + totals["dropped"] >= 20 * ROUNDS, summary
    assert totals["RELOC_BEGIN"] > 0 and totals["relocated"] > 0, summary

    stage = "after the last round, settling the directory itself"
    try:
        final = asyncio.run(check_store(data_dir, models, settle_first=True))
        assert final.ends == last.ends
        stage = "rebuilding the settled directory's compacted ConsumeQueues"
        rebuild_and_check(data_dir, models, last.ends)
        # recovery of a crashed cleaning and a rebuild at once
        stage = "rebuilding the compacted ConsumeQueues of the last crash"
        rebuild_and_check(crashed_copy, models, last.ends)
    except AssertionError as exc:
        raise AssertionError(f"{stage}: {exc}") from exc

    assert not failed_passes, f"{len(failed_passes)} retention passes of the drivers failed " \
                              f"(see the drivers' stderr), the first: {failed_passes[:5]}"
