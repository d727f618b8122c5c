"""Faults through the real broker (``tests.gateway.faulty_broker``, the normal broker with
faults injected by marker files): a failed CommitLog fdatasync takes the store offline
(KAFKA_STORAGE_ERROR for every write, earlier data still readable, an ERROR in the log) until a
restart; a failing background service is logged with its traceback and restarted, or answers
acks=-1 producers with an error instead of leaving them to time out."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch, decode_records

PRODUCE, FETCH, CREATE_TOPICS = 0, 1, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
DEADLINE_S = 30.0


class FaultyBroker(BrokerProcess):
    def command(self) -> list[str]:
        args = super().command()
        at = args.index("commitgate")  # after "python -m"
        return [sys.executable, "-m", "tests.gateway.faulty_broker", *args[at + 1:]]


@pytest.fixture
def faults(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "faults"
    directory.mkdir()
    monkeypatch.setenv("COMMITGATE_FAULTS", str(directory))
    return directory


def start(tmp_path: Path, **overrides: str) -> FaultyBroker:
    return FaultyBroker(tmp_path / "data", {"num.partitions": "1", **overrides}).start()


def produce(client: WireClient, value: bytes, *, acks: int) -> object:
    request = Produce(acks=acks, timeout_ms=30_000, topic_data=[Produce.TopicProduceData(
        name="t", partition_data=[Produce.PartitionProduceData(
            index=0, records=build_batch([(None, value, [], int(time.time() * 1000))]))])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


def fetch_values(client: WireClient) -> list[bytes]:
    found: list[bytes] = []
    for _ in range(1_000):
        request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
                        topics=[Fetch.FetchTopic(topic="t", partitions=[Fetch.FetchPartition(
                            partition=0, fetch_offset=len(found), partition_max_bytes=8 << 20)])])
        part = client.request(FETCH, 12, request).responses[0].partitions[0]
        assert part.error_code == ErrorCode.NONE
        records = decode_records(bytes(part.records or b""))
        if not records:
            return found
        found += [r.value for r in records]
    raise AssertionError("fetch did not reach the end")


def create_topic(client: WireClient) -> None:
    out = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name="t", num_partitions=1, replication_factor=1)], timeout_ms=5000)).topics[0]
    assert out.error_code == ErrorCode.NONE


def wait_for(condition: Callable[[], bool], what: str, broker: BrokerProcess) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{broker.log_tail()}"
        time.sleep(0.05)


def log_text(broker: BrokerProcess) -> str:
    return broker.log_path.read_text(errors="replace")


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_failed_fsync_takes_the_store_offline_until_a_restart(tmp_path, faults, flush):
    broker = start(tmp_path, **{"flush.disk.type": flush, "flush.interval.ms": "20"})
    try:
        with WireClient(broker.bootstrap) as client:
            create_topic(client)
            acked = [b"before-%d" % n for n in range(3)]
            for value in acked:
                assert produce(client, value, acks=-1).error_code == ErrorCode.NONE
            (faults / "fdatasync-commitlog").touch()
            first = produce(client, b"during", acks=-1 if flush == "SYNC_FLUSH" else 1)
            wait_for(lambda: "is OFFLINE" in log_text(broker), "the offline ERROR", broker)
            if flush == "SYNC_FLUSH":
                assert first.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            for acks in (-1, 1):
                out = produce(client, b"refused", acks=acks)
                assert out.error_code == ErrorCode.KAFKA_STORAGE_ERROR, acks
                assert "t-0" in out.error_message and "offline" in out.error_message
            refused = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
                name="t2", num_partitions=1, replication_factor=1)], timeout_ms=5000)).topics[0]
            assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR  # topic changes too
            assert "offline" in refused.error_message
            readable = fetch_values(client)  # what was durable: under ASYNC_FLUSH, what the
            if flush == "SYNC_FLUSH":        # timer had synced of the page cache's acks
                assert readable == acked
            else:
                assert readable == acked[:len(readable)]
        offline = [line for line in log_text(broker).splitlines() if "is OFFLINE" in line]
        assert len(offline) == 1 and " ERROR " in offline[0] and "/commitlog/" in offline[0]
        (faults / "fdatasync-commitlog").unlink()
        assert broker.stop() == 0
        broker.start()
        wait_for(lambda: "unclean start" in log_text(broker), "the unclean start", broker)
        with WireClient(broker.bootstrap) as client:
            assert fetch_values(client)[:3] == acked
            assert produce(client, b"after", acks=-1).error_code == ErrorCode.NONE
            assert fetch_values(client)[-1] == b"after"
    finally:
        broker.kill()


def test_a_failing_group_commit_answers_acks_all_producers(tmp_path, faults):
    broker = start(tmp_path, **{"flush.disk.type": "SYNC_FLUSH",
                                "sync.flush.timeout.ms": "60000"})
    try:
        with WireClient(broker.bootstrap, timeout_s=20.0) as client:
            create_topic(client)
            assert produce(client, b"ok", acks=-1).error_code == ErrorCode.NONE
            (faults / "raise-group-commit").touch()
            out = produce(client, b"x", acks=-1)  # answered, not left to time out
            assert out.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert fetch_values(client) == [b"ok"]
        text = log_text(broker)
        assert "background task group-commit failed; not restarted" in text
        assert "RuntimeError: injected fault in group-commit" in text and "Traceback" in text
        assert "is OFFLINE" in text
    finally:
        broker.kill()


RESTARTED = ["flush-consumequeue", "retention", "index-builder", "producer-snapshots",
             "allocate-mapped-file"]


def test_failing_background_services_are_logged_and_restarted(tmp_path, faults):
    broker = start(tmp_path, **{"consumequeue.flush.interval.ms": "50",
                                "log.retention.check.interval.ms": "50",
                                "producer.snapshot.interval.ms": "50",
                                "offsets.retention.check.interval.ms": "50",
                                "commitlog.segment.bytes": str(1 << 20)})
    try:
        with WireClient(broker.bootstrap) as client:
            create_topic(client)
            for task in [*RESTARTED, "offset-expiry"]:
                (faults / f"raise-{task}").touch()
                value = 0
                while (faults / f"raise-{task}").exists():  # a roll needs data
                    assert produce(client, b"%d" % value + b"x" * 50_000, acks=1).error_code \
                        == ErrorCode.NONE
                    value += 1
                    assert value < 5_000, f"{task} never ran its step:\n{broker.log_tail()}"
                    time.sleep(0.01)
                wait_for(lambda task=task: f"RuntimeError: injected fault in {task}"
                         in log_text(broker), f"{task}'s traceback", broker)
            count = len(fetch_values(client))
            assert produce(client, b"last", acks=-1).error_code == ErrorCode.NONE
            assert len(fetch_values(client)) == count + 1
        text = log_text(broker)
        for task in ("flush-consumequeue", "retention", "index-builder", "producer-snapshots"):
            assert f"background task {task} failed; restarting it (restart 1)" in text, task
        assert "allocate-mapped-file: creating a CommitLog segment failed" in text
        assert "offset expiry failed" in text  # its loop outlives a bad round by itself
        assert "is OFFLINE" not in text
        assert broker.stop() == 0
    finally:
        broker.kill()
