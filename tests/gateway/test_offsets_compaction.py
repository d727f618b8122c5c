"""``__consumer_offsets`` is compacted, so a broker's start-up replays the live keys, not every
commit ever made: after 1,000,000 offset commits to 100 (group, partition) keys, the start-up
replays within 2x of what it replays after 100 commits.

Real broker subprocesses, real OffsetCommit requests (generation -1, no member: the simple,
admin-style commit Kafka accepts for a group without members), pipelined on one connection.
Tests here never assert timings: the start-up times are printed, and the assertion is on a
deterministic proxy, the records (and bytes) of ``__consumer_offsets`` from each partition's
log start, which is exactly what ``OffsetsTopic.replay`` walks at start. The broker does not
log how many records it replayed, so they are counted by fetching the topic the same way.
"""
from __future__ import annotations

import re
import struct
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.groups.offsets_topic import java_hash
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import decode_records, iter_batch_headers

FETCH, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, DESCRIBE_LOG_DIRS = 1, 8, 9, 19, 35
COMMIT_VERSION = 9
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
TOPIC, GROUP, KEYS = "orders", "offsets-load", 100  # one group, 100 partitions: 100 keys
BIG_COMMITS, SMALL_COMMITS = 1_000_000, 100
WINDOW = 32  # requests in flight on the connection (the broker pauses reading at 64)
COMMIT_DEADLINE_S = 240.0
COMPACTION_DEADLINE_S = 180.0
READY_DEADLINE_S = 60.0
SETTINGS = {"commitlog.segment.bytes": str(4 << 20), "log.retention.check.interval.ms": "200",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}

Commit = messages.get("OffsetCommitRequest").cls
OffsetFetch = messages.get("OffsetFetchRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
LogDirs = messages.get("DescribeLogDirsRequest").cls
CLEANED = re.compile(rf"compaction: cleaned {OFFSETS}-(\d+) up to offset (\d+)")
LOADED = re.compile(r"group coordinator: (\d+) groups, (\d+) with committed offsets loaded")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def committed_value(request: int, partition: int) -> int:
    """The offset request number ``request`` commits for ``partition`` (distinct per key)."""
    return request * 1000 + partition


def commit_frame(client: WireClient, request: int) -> bytes:
    return client.frame(OFFSET_COMMIT, COMMIT_VERSION, Commit(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[Commit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            Commit.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=committed_value(request, p),
                committed_leader_epoch=-1, committed_metadata="")
            for p in range(KEYS)])]))


def read_pipelined(client: WireClient, api_key: int, version: int, correlation: int) -> object:
    """The next response of a pipelined connection, which must answer ``correlation``."""
    data = client.read_frame()
    (got,) = struct.unpack_from(">i", data)
    assert got == correlation, (got, correlation)
    codec = messages.response(api_key)
    response, end = codec.decode(memoryview(data), version,
                                 5 if version in codec.spec.flexible else 4)
    assert end == len(data)
    return response


def commit_many(client: WireClient, requests: int) -> float:
    """``requests`` OffsetCommits of KEYS partitions each, WINDOW in flight; returns seconds."""
    start = time.monotonic()
    first = client.correlation + 1
    sent = answered = 0
    while answered < requests:
        while sent < requests and sent - answered < WINDOW:
            client.send_raw(commit_frame(client, sent))
            sent += 1
        response = read_pipelined(client, OFFSET_COMMIT, COMMIT_VERSION, first + answered)
        codes = {p.error_code for t in response.topics for p in t.partitions}
        assert codes == {ErrorCode.NONE}, (answered, codes)
        answered += 1
        elapsed = time.monotonic() - start
        if answered % 1000 == 0 and elapsed > COMMIT_DEADLINE_S:
            pytest.fail(f"{answered * KEYS} commits in {elapsed:.0f}s "
                        f"({answered * KEYS / elapsed:.0f} commits/s): too slow here for "
                        f"{requests * KEYS} within {COMMIT_DEADLINE_S:.0f}s")
    return time.monotonic() - start


def offsets_partition_sizes(client: WireClient) -> dict[int, int]:
    response = client.request(DESCRIBE_LOG_DIRS, 4, LogDirs(topics=[
        LogDirs.DescribableLogDirTopic(topic=OFFSETS, partitions=list(range(OFFSETS_PARTITIONS)))]))
    return {p.partition_index: p.partition_size
            for t in response.results[0].topics for p in t.partitions}


def replayable(client: WireClient) -> tuple[int, int]:
    """(records with a key, batch bytes) of __consumer_offsets from each partition's log start
    to its end: what ``OffsetsTopic._replay_partition`` reads at start (from the batch holding
    the offset, records at or past it, the next read after the batch)."""
    records = size = 0
    for partition in range(OFFSETS_PARTITIONS):
        offset = 0  # nothing moves the log start of __consumer_offsets here
        while True:
            response = client.request(FETCH, 12, Fetch(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                session_epoch=-1, topics=[Fetch.FetchTopic(topic=OFFSETS, partitions=[
                    Fetch.FetchPartition(partition=partition, fetch_offset=offset,
                                         partition_max_bytes=8 << 20)])]))
            answer = response.responses[0].partitions[0]
            assert answer.error_code == ErrorCode.NONE, (partition, offset, answer.error_code)
            data = bytes(answer.records or b"")
            headers = list(iter_batch_headers(data))
            if not headers:
                assert offset >= answer.high_watermark, (partition, offset, answer.high_watermark)
                break
            records += sum(1 for r in decode_records(data) if r.offset >= offset and r.key)
            size += sum(h.size for h in headers)
            offset = headers[-1].base_offset + headers[-1].last_offset_delta + 1
    return records, size


def cleaned_up_to(broker: BrokerProcess, partition: int) -> int:
    """The highest offset the broker's log says ``partition`` of the offsets topic was cleaned
    up to (-1: never)."""
    cleaned = -1
    for line in broker.log_path.read_text(errors="replace").splitlines():
        match = CLEANED.search(line)
        if match and int(match.group(1)) == partition:
            cleaned = max(cleaned, int(match.group(2)))
    return cleaned


def _stamp(line: str) -> datetime | None:
    match = STAMP.match(line)
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f") if match else None


@dataclass
class StartUp:
    listening_s: float  # spawn -> the port accepts connections
    ready_s: float  # spawn -> the first OffsetFetch answered with every committed offset
    logged_load_s: float  # from the log: store open -> the group coordinator's loaded line
    loaded_line: str


def restart_and_time(broker: BrokerProcess, requests: int) -> StartUp:
    """SIGTERM, start again on the same data dir, and time the start-up until the group's
    offsets are served (the latest ones: asserted)."""
    assert broker.stop() == 0, broker.log_tail()
    log_from = broker.log_path.stat().st_size
    spawned = time.monotonic()
    broker.start()
    listening = time.monotonic() - spawned
    with WireClient(broker.bootstrap, timeout_s=READY_DEADLINE_S) as client:
        response = client.request(OFFSET_FETCH, 7, OffsetFetch(group_id=GROUP, topics=[
            OffsetFetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(KEYS)))]))
        ready = time.monotonic() - spawned
    got = {p.partition_index: (p.committed_offset, p.error_code)
           for p in response.topics[0].partitions}
    assert got == {p: (committed_value(requests - 1, p), ErrorCode.NONE) for p in range(KEYS)}
    with broker.log_path.open("rb") as log:
        log.seek(log_from)
        lines = log.read().decode(errors="replace").splitlines()
    opened = next((_stamp(line) for line in lines if "store open at" in line), None)
    loaded = next((line for line in lines if LOADED.search(line)), "")
    assert LOADED.search(loaded) and LOADED.search(loaded).groups() == ("1", "1"), lines
    logged = (_stamp(loaded) - opened).total_seconds() if opened and _stamp(loaded) else -1.0
    return StartUp(listening, ready, logged, loaded.split(": ", 1)[-1])


@dataclass
class Outcome:
    commit_s: float
    compaction_wait_s: float
    cleaned_to: int
    end_offset: int
    size_before: int  # DescribeLogDirs size of the group's partition when the commits ended
    size_after: int
    records: int  # replayable records (counted before the stop, so what the start replays)
    bytes: int
    records_after_restart: int
    segments: int  # CommitLog segment files at the stop (the cleaner frees the dead ones)
    start_up: StartUp


def run(root: Path, commits: int) -> Outcome:
    """A broker of its own: ``commits`` commits over KEYS keys, compaction, a restart."""
    requests = commits // KEYS
    broker = BrokerProcess(root / "data", SETTINGS, log_path=root / "broker.log").start()
    try:
        with WireClient(broker.bootstrap, timeout_s=60) as client:
            created = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
                name=TOPIC, num_partitions=KEYS, replication_factor=1)], timeout_ms=5000))
            assert created.topics[0].error_code == ErrorCode.NONE
            commit_s = commit_many(client, requests)
            partition = (java_hash(GROUP) & 0x7FFFFFFF) % OFFSETS_PARTITIONS  # Kafka's rule
            size_before = offsets_partition_sizes(client)[partition]
            end = requests * KEYS
            # the partition's last batch is never cleaned (Kafka never cleans the active
            # segment): a full cleaning reaches the last batch's base offset
            last_base = end - KEYS
            waited = time.monotonic()
            while requests > 1 and cleaned_up_to(broker, partition) < last_base and \
                    time.monotonic() - waited < COMPACTION_DEADLINE_S:
                time.sleep(0.2)
            compaction_wait_s = time.monotonic() - waited
            time.sleep(1)  # a few more cleaner passes: nothing must be left to clean
            records, size = replayable(client)
            size_after = offsets_partition_sizes(client)[partition]
        start_up = restart_and_time(broker, requests)
        with WireClient(broker.bootstrap, timeout_s=60) as client:
            records_after_restart, _ = replayable(client)
        assert broker.stop() == 0, broker.log_tail()
        segments = len(list((broker.data_dir / "commitlog").iterdir()))
        return Outcome(commit_s, compaction_wait_s, cleaned_up_to(broker, partition), end,
                       size_before, size_after, records, size, records_after_restart, segments,
                       start_up)
    finally:
        broker.kill()


def report(name: str, outcome: Outcome) -> None:
    s = outcome.start_up
    print(f"\n{name}: {outcome.end_offset} commits in {outcome.commit_s:.1f}s "
          f"({outcome.end_offset / max(outcome.commit_s, 1e-9):.0f}/s); cleaned up to offset "
          f"{outcome.cleaned_to} after waiting {outcome.compaction_wait_s:.1f}s; partition "
          f"{outcome.size_before} -> {outcome.size_after} bytes, {outcome.segments} CommitLog "
          f"segments; replayable at start: "
          f"{outcome.records} records, {outcome.bytes} bytes ({outcome.records_after_restart} "
          f"after the restart)\n  start-up: listening {s.listening_s:.2f}s, offsets served "
          f"{s.ready_s:.2f}s, store open -> groups loaded (log) {s.logged_load_s:.3f}s; "
          f"{s.loaded_line}")


@pytest.mark.timeout(COMMIT_DEADLINE_S + COMPACTION_DEADLINE_S + 300)
def test_start_up_after_a_million_commits_replays_the_live_keys_only(tmp_path):
    small = run(tmp_path / "small", SMALL_COMMITS)
    report(f"{SMALL_COMMITS} commits", small)
    big = run(tmp_path / "big", BIG_COMMITS)
    report(f"{BIG_COMMITS} commits", big)
    print(f"ratio big/small: start-up (offsets served) "
          f"{big.start_up.ready_s / small.start_up.ready_s:.2f}x, listening "
          f"{big.start_up.listening_s / small.start_up.listening_s:.2f}x, replayed records "
          f"{big.records / max(small.records, 1):.2f}x, bytes "
          f"{big.bytes / max(small.bytes, 1):.2f}x")
    assert small.records == SMALL_COMMITS
    assert big.cleaned_to >= big.end_offset - KEYS, \
        f"__consumer_offsets cleaned up to {big.cleaned_to} of {big.end_offset}"
    # what the start-up replays after 1M commits: within 2x of after 100, plus one batch
    assert big.records <= 2 * small.records + KEYS, (big.records, small.records)
    assert big.records_after_restart <= big.records
    one_batch = small.bytes  # the 100 commits are one batch
    assert big.bytes <= 2 * small.bytes + one_batch, (big.bytes, small.bytes)
