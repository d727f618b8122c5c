"""Transactions against a real broker: confluent-kafka producers and consumers for the
semantics (isolation levels, the stable offset, fencing, timeouts), the raw wire for Kafka's
error codes, and broker crashes at each step of a commit (tests/gateway/faulty_broker.py)."""
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.gateway.idempotent_wire import (
    INIT_PRODUCER_ID,
    InitPid,
    create,
    idempotent_batch,
    produce,
    stored,
)
from tests.gateway.test_faults import FaultyBroker
from tests.waiting import wait_until

DEADLINE_S = 60.0
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, LIST_OFFSETS = 24, 25, 26, 2
DESCRIBE_TXNS, LIST_TXNS = 65, 66
AddPartitions = messages.get("AddPartitionsToTxnRequest").cls
EndTxn = messages.get("EndTxnRequest").cls
ListOffsets = messages.get("ListOffsetsRequest").cls
DescribeTxns = messages.get("DescribeTransactionsRequest").cls
ListTxns = messages.get("ListTransactionsRequest").cls
# quick coordinator rounds so that timeouts fire within a test's patience
SETTINGS = {"transaction.state.log.num.partitions": "3",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory) -> BrokerProcess:
    process = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", SETTINGS)
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


def make_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def producer(bootstrap: str, txn_id: str, **settings) -> Producer:
    made = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **settings})
    made.init_transactions(30)
    return made


def send(made: Producer, topic: str, values: list[bytes], partitions: int = 3) -> None:
    for i, value in enumerate(values):
        made.produce(topic, value=value, partition=i % partitions)
    made.flush(30)


def read_all(bootstrap: str, topic: str, committed: bool, partitions: int = 3) -> list[bytes]:
    """Every record a consumer of that isolation level sees, partition by partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} did not reach its end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())
            else:
                values[message.partition()].append(message.value())
        return [v for p in range(partitions) for v in values[p]]
    finally:
        consumer.close()


def latest(bootstrap: str, topic: str, partition: int, committed: bool) -> int:
    request = ListOffsets(replica_id=-1, isolation_level=int(committed), topics=[
        ListOffsets.ListOffsetsTopic(name=topic, partitions=[ListOffsets.ListOffsetsPartition(
            partition_index=partition, timestamp=-1)])])
    with WireClient(bootstrap) as client:
        return client.request(LIST_OFFSETS, 5, request).topics[0].partitions[0].offset


def describe(bootstrap: str, txn_id: str):
    with WireClient(bootstrap) as client:
        return client.request(DESCRIBE_TXNS, 0, DescribeTxns(
            transactional_ids=[txn_id])).transaction_states[0]


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_read_committed_sees_committed_transactions_read_uncommitted_everything(txn_broker):
    bootstrap = txn_broker.bootstrap
    make_topic(bootstrap, "tx-basic")
    made = producer(bootstrap, "basic")
    try:
        for prefix, commit in (("one", True), ("two", False), ("three", True)):
            made.begin_transaction()
            send(made, "tx-basic", values(prefix, 6))
            made.commit_transaction(30) if commit else made.abort_transaction(30)
    finally:
        made.flush(5)
    committed = [v for p in range(3) for v in values("one", 6)[p::3] + values("three", 6)[p::3]]
    assert read_all(bootstrap, "tx-basic", committed=True) == committed
    everything = [v for p in range(3) for prefix in ("one", "two", "three")
                  for v in values(prefix, 6)[p::3]]
    assert read_all(bootstrap, "tx-basic", committed=False) == everything
    state = describe(bootstrap, "basic")
    assert (state.error_code, state.transaction_state) == (ErrorCode.NONE, "CompleteCommit")


def test_an_open_transaction_holds_read_committed_readers_at_its_first_offset(txn_broker):
    bootstrap = txn_broker.bootstrap
    make_topic(bootstrap, "tx-open", 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("tx-open", value=b"before", partition=0)
    plain.flush(30)
    made = producer(bootstrap, "open")
    made.begin_transaction()
    send(made, "tx-open", values("inside", 3), partitions=1)
    plain.produce("tx-open", value=b"beside", partition=0)  # after the open transaction
    plain.flush(30)
    assert latest(bootstrap, "tx-open", 0, committed=False) == 5
    assert latest(bootstrap, "tx-open", 0, committed=True) == 1  # the stable offset
    assert read_all(bootstrap, "tx-open", committed=True, partitions=1) == [b"before"]
    with WireClient(bootstrap) as client:  # ListTransactions shows it ongoing
        listed = client.request(LIST_TXNS, 1, ListTxns(state_filters=["Ongoing"],
                                                       producer_id_filters=[],
                                                       duration_filter=-1))
    assert "open" in {t.transactional_id for t in listed.transaction_states}
    made.commit_transaction(30)
    assert latest(bootstrap, "tx-open", 0, committed=True) == 6
    assert read_all(bootstrap, "tx-open", committed=True, partitions=1) == [
        b"before", *values("inside", 3), b"beside"]


def test_a_newer_producer_fences_the_older_and_aborts_its_transaction(txn_broker):
    bootstrap = txn_broker.bootstrap
    make_topic(bootstrap, "tx-zombie")
    zombie = producer(bootstrap, "zombie")
    zombie.begin_transaction()
    send(zombie, "tx-zombie", values("zombie", 6))
    successor = producer(bootstrap, "zombie")  # aborts the zombie's transaction first
    successor.begin_transaction()
    send(successor, "tx-zombie", values("successor", 3))
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as failed:
        zombie.produce("tx-zombie", value=b"late", partition=0)
        zombie.commit_transaction(30)
    assert failed.value.args[0].fatal() or "fenced" in str(failed.value).lower()
    assert read_all(bootstrap, "tx-zombie", committed=True) == values("successor", 3)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(txn_broker):
    bootstrap = txn_broker.bootstrap
    make_topic(bootstrap, "tx-timeout", 1)
    made = producer(bootstrap, "slow", **{"transaction.timeout.ms": 1000})
    made.begin_transaction()
    send(made, "tx-timeout", values("slow", 2), partitions=1)
    assert latest(bootstrap, "tx-timeout", 0, committed=True) == 0
    wait_until(lambda: describe(bootstrap, "slow").transaction_state == "CompleteAbort",
               "the coordinator to abort the transaction")
    assert latest(bootstrap, "tx-timeout", 0, committed=True) == 3  # two records, one marker
    with pytest.raises(KafkaException):
        made.commit_transaction(30)
    assert read_all(bootstrap, "tx-timeout", committed=True, partitions=1) == []


def _raw_txn(client: WireClient, txn_id: str) -> tuple[int, int]:
    out = client.request(INIT_PRODUCER_ID, 4, InitPid(transactional_id=txn_id,
                                                      transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1))
    assert out.error_code == ErrorCode.NONE
    return out.producer_id, out.producer_epoch


def _add(client: WireClient, version: int, txn_id: str, pid: int, epoch: int,
         topics: dict[str, list[int]]):
    request = AddPartitions(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                AddPartitions.AddPartitionsToTxnTopic(name=t, partitions=p)
                                for t, p in topics.items()])
    out = client.request(ADD_PARTITIONS, version, request).results_by_topic_v3_and_below
    return {(t.name, r.partition_index): r.partition_error_code
            for t in out for r in t.results_by_partition}


def _end(client: WireClient, txn_id: str, pid: int, epoch: int, commit: bool,
         version: int = 3) -> int:
    return client.request(END_TXN, version, EndTxn(transactional_id=txn_id, producer_id=pid,
                                                   producer_epoch=epoch,
                                                   committed=commit)).error_code


def test_bad_transactional_requests_get_kafkas_errors_and_store_nothing(txn_broker):
    with WireClient(txn_broker.bootstrap) as client:
        create(client, "tx-bad")
        too_long = client.request(INIT_PRODUCER_ID, 4, InitPid(
            transactional_id="bad", transaction_timeout_ms=10**9, producer_id=-1,
            producer_epoch=-1))
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        pid, epoch = _raw_txn(client, "bad")
        assert _add(client, 3, "nobody", pid, epoch, {"tx-bad": [0]}) == {
            ("tx-bad", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert _add(client, 3, "bad", pid, epoch + 1, {"tx-bad": [0]}) == {
            ("tx-bad", 0): ErrorCode.PRODUCER_FENCED}
        assert _add(client, 1, "bad", pid, epoch + 1, {"tx-bad": [0]}) == {
            ("tx-bad", 0): ErrorCode.INVALID_PRODUCER_EPOCH}  # before KIP-588
        assert _add(client, 3, "bad", pid, epoch, {"tx-bad": [0], "no-such-topic": [0]}) == {
            ("tx-bad", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert _end(client, "bad", pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE
        # a transactional batch for a partition the transaction does not hold
        out = produce(client, "tx-bad", idempotent_batch(pid, 0, epoch=epoch, transactional=True))
        assert out.error_code == ErrorCode.INVALID_TXN_STATE
        assert _add(client, 3, "bad", pid, epoch, {"tx-bad": [0]}) == {
            ("tx-bad", 0): ErrorCode.NONE}
        assert produce(client, "tx-bad", idempotent_batch(
            pid, 0, epoch=epoch, transactional=True)).error_code == ErrorCode.NONE
        gap = produce(client, "tx-bad", idempotent_batch(pid, 5, epoch=epoch, transactional=True))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _end(client, "bad", pid, epoch, commit=True) == ErrorCode.NONE
        assert _end(client, "bad", pid, epoch, commit=True) == ErrorCode.NONE  # a retry
        assert _end(client, "bad", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        # the two records and the COMMIT marker; nothing of the refused batches
        assert [r.value for r in stored(client, "tx-bad")] == [b"0-0", b"0-1"]
        assert describe(txn_broker.bootstrap, "unknown-id").error_code == \
            ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


# ---- crashes -----------------------------------------------------------------------------------

def _start(data: Path, faults: Path | None = None) -> BrokerProcess:
    settings = dict(SETTINGS)
    process = FaultyBroker(data, settings) if faults else BrokerProcess(data, settings)
    return process.start()


def test_a_broker_killed_inside_a_transaction_restarts_with_it_open_then_times_it_out(
        tmp_path):
    data = tmp_path / "data"
    process = _start(data)
    try:
        make_topic(process.bootstrap, "tx-kill", 1)
        made = producer(process.bootstrap, "killed", **{"transaction.timeout.ms": 3000})
        made.begin_transaction()
        send(made, "tx-kill", values("open", 4), partitions=1)
        process.kill()
        process = _start(data)
        assert latest(process.bootstrap, "tx-kill", 0, committed=False) == 4
        assert latest(process.bootstrap, "tx-kill", 0, committed=True) == 0
        wait_until(lambda: describe(process.bootstrap, "killed").transaction_state ==
                   "CompleteAbort", "the restarted coordinator to time the transaction out")
        assert read_all(process.bootstrap, "tx-kill", committed=True, partitions=1) == []
        again = producer(process.bootstrap, "killed")  # the id is usable again
        again.begin_transaction()
        send(again, "tx-kill", values("after", 2), partitions=1)
        again.commit_transaction(30)
        assert read_all(process.bootstrap, "tx-kill", committed=True, partitions=1) == \
            values("after", 2)
    finally:
        process.kill()


@pytest.mark.parametrize("fault", ["exit-before-markers", "exit-after-markers"])
def test_a_commit_cut_by_a_crash_is_completed_after_restart(tmp_path, monkeypatch, fault):
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("COMMITGATE_FAULTS", str(faults))
    data = tmp_path / "data"
    process = _start(data, faults)
    try:
        make_topic(process.bootstrap, "tx-crash")
        made = producer(process.bootstrap, "crash", **{"transaction.timeout.ms": 60000})
        made.begin_transaction()
        send(made, "tx-crash", values("all", 9))
        (faults / fault).touch()
        with pytest.raises(KafkaException):
            made.commit_transaction(10)  # the broker dies answering it
        process.process.wait(DEADLINE_S)
        assert process.kill() == 9, process.log_tail()  # died where the fault says
        (faults / fault).unlink()
        process = _start(data)
        wait_until(lambda: describe(process.bootstrap, "crash").transaction_state ==
                   "CompleteCommit", "the restarted coordinator to complete the commit")
        committed = read_all(process.bootstrap, "tx-crash", committed=True)
        assert sorted(committed) == sorted(values("all", 9))  # all of it, exactly once
    finally:
        process.kill()


def test_an_idle_transactional_id_expires(tmp_path):
    settings = {**SETTINGS, "transactional.id.expiration.ms": "500",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "200"}
    with BrokerProcess(tmp_path / "data", settings) as process:
        make_topic(process.bootstrap, "tx-expire", 1)
        made = producer(process.bootstrap, "short-lived")
        made.begin_transaction()
        send(made, "tx-expire", values("kept", 2), partitions=1)
        made.commit_transaction(30)
        wait_until(lambda: describe(process.bootstrap, "short-lived").error_code ==
                   ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "the transactional id to expire")
        assert read_all(process.bootstrap, "tx-expire", committed=True, partitions=1) == \
            values("kept", 2)
    # the tombstone holds across a restart
    with BrokerProcess(tmp_path / "data", SETTINGS) as process:
        assert describe(process.bootstrap, "short-lived").error_code == \
            ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_the_batched_v4_form_adds_and_verifies_partitions(txn_broker):
    with WireClient(txn_broker.bootstrap) as client:
        create(client, "tx-v4", 2)
        pid, epoch = _raw_txn(client, "batched")

        def batched(verify: bool, partitions: list[int]) -> dict:
            request = AddPartitions(transactions=[AddPartitions.AddPartitionsToTxnTransaction(
                transactional_id="batched", producer_id=pid, producer_epoch=epoch,
                verify_only=verify, topics=[AddPartitions.AddPartitionsToTxnTopic(
                    name="tx-v4", partitions=partitions)])])
            out = client.request(ADD_PARTITIONS, 4, request)
            assert out.error_code == ErrorCode.NONE
            [txn] = out.results_by_transaction
            return {r.partition_index: r.partition_error_code
                    for t in txn.topic_results for r in t.results_by_partition}

        assert batched(True, [0, 1]) == {0: ErrorCode.INVALID_TXN_STATE,
                                         1: ErrorCode.INVALID_TXN_STATE}
        assert batched(False, [0]) == {0: ErrorCode.NONE}
        assert batched(True, [0, 1]) == {0: ErrorCode.NONE, 1: ErrorCode.INVALID_TXN_STATE}
        assert describe(txn_broker.bootstrap, "batched").transaction_state == "Ongoing"
        listed = client.request(LIST_TXNS, 2, ListTxns(state_filters=[], producer_id_filters=[],
                                                       duration_filter=-1,
                                                       transactional_id_pattern="batch.*"))
        assert [t.transactional_id for t in listed.transaction_states] == ["batched"]
        assert _end(client, "batched", pid, epoch, commit=False) == ErrorCode.NONE


def _keyed(bootstrap: str, topic: str, committed: bool) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "keyed",
                         "enable.partition.eof": True, "isolation.level": "read_committed"
                         if committed else "read_uncommitted"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error():
                return out
            if message is not None:
                out.append((message.key(), message.value()))
        raise AssertionError(f"reading {topic} did not reach its end")
    finally:
        consumer.close()


def test_compaction_drops_aborted_records_and_never_cleans_past_an_open_transaction(tmp_path):
    settings = {**SETTINGS, "log.retention.check.interval.ms": "200"}
    with BrokerProcess(tmp_path / "data", settings) as process:
        bootstrap = process.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("tx-table", 1, config={
            "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
            "max.compaction.lag.ms": "500"})])["tx-table"].result(30)
        plain = Producer({"bootstrap.servers": bootstrap})
        for key in (b"k1", b"k2"):
            plain.produce("tx-table", b"old", key, partition=0)
            plain.flush(30)
        aborted = producer(bootstrap, "table-aborted")
        aborted.begin_transaction()
        aborted.produce("tx-table", b"aborted", b"k1", partition=0)
        aborted.flush(30)
        aborted.abort_transaction(30)
        open_txn = producer(bootstrap, "table-open")
        open_txn.begin_transaction()
        open_txn.produce("tx-table", b"pending", b"k2", partition=0)
        open_txn.flush(30)
        plain.produce("tx-table", b"end", b"the-end", partition=0)  # never cleaned: the last
        plain.flush(30)
        wait_until(lambda: (b"k1", b"aborted") not in _keyed(bootstrap, "tx-table", False),
                   "the cleaner to drop the aborted record")
        # k2's old value stays: the record that would replace it may still be aborted
        assert _keyed(bootstrap, "tx-table", True) == [(b"k1", b"old"), (b"k2", b"old")]
        open_txn.commit_transaction(30)
        wait_until(lambda: (b"k2", b"old") not in _keyed(bootstrap, "tx-table", True),
                   "the cleaner to drop the replaced value once committed")
        assert _keyed(bootstrap, "tx-table", True) == [
            (b"k1", b"old"), (b"k2", b"pending"), (b"the-end", b"end")]


def test_query_by_key_leaves_out_aborted_records(txn_broker):
    bootstrap = txn_broker.bootstrap
    make_topic(bootstrap, "tx-query", 1)
    for commit in (True, False):
        made = producer(bootstrap, f"query-{commit}")
        made.begin_transaction()
        made.produce("tx-query", b"committed" if commit else b"aborted", b"the-key", partition=0)
        made.flush(30)
        made.commit_transaction(30) if commit else made.abort_transaction(30)
    url = f"{txn_broker.admin_url}/v1/query?topic=tx-query&key=the-key"
    with urllib.request.urlopen(url, timeout=30) as answer:
        found = json.load(answer)
    assert [r["value"] for r in found["records"]] == ["committed"]
