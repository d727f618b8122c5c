"""Transactional offset commits (TxnOffsetCommit, issue 23): offsets a transaction commits for
a group become visible to OffsetFetch only when the transaction commits; an abort drops them;
OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT while they are pending.

The first tests drive the group coordinator directly on a real MessageStore in a temp dir,
closing and reopening it to check what the replay of ``__consumer_offsets`` rebuilds (pending
offsets, COMMIT and ABORT markers, Kafka's rule that the later record wins between a plain
and a transactional commit of one partition). The others go through a real broker subprocess
over the raw wire, and through confluent-kafka's transactional producer.
"""
from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.engine import MessageStore, StoreConfig
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.coordinator import GroupCoordinator
from commitgate.gateway.groups.offsets import Commit, CommitRequest
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC, java_hash
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import KafkaBodyFormat

GROUP, TOPIC = "txn-group", "orders"
PID, EPOCH = 4000, 0


# ---- the group coordinator on a real store ------------------------------------------------

@contextlib.asynccontextmanager
async def coordinator(tmp_path) -> AsyncIterator[GroupCoordinator]:
    """A group coordinator started (replayed) over the store in ``tmp_path``, stopped after."""
    config = BrokerConfig(store=StoreConfig(data_dir=tmp_path / "data",
                                            commitlog_segment_bytes=1 << 20,
                                            consumequeue_entries_per_file=1000),
                          offsets_topic_num_partitions=3)
    store = MessageStore(config.store, KafkaBodyFormat())
    await store.open()
    groups = GroupCoordinator(config, store)
    try:
        groups.start()
        yield groups
    finally:
        await groups.stop()
        await store.close()


def request(offsets: dict[int, int], group: str = GROUP, generation: int = -1,
            member: str = "") -> CommitRequest:
    return CommitRequest(group, generation, member, None, -1,
                         [Commit(TOPIC, p, o, -1, "") for p, o in offsets.items()], 3)


def committed(groups: GroupCoordinator, group: str = GROUP) -> dict[int, int]:
    [(_, parts)] = groups.offsets.fetch(group, [(TOPIC, [0, 1, 2])])
    return {p: v.offset for p, v in parts if v is not None}


def log_end(groups: GroupCoordinator, group: str = GROUP) -> int:
    return groups.store.log_end_offset(OFFSETS_TOPIC, groups.topic.partition_for(group))


async def txn_commit(groups: GroupCoordinator, offsets: dict[int, int], pid: int = PID,
                     group: str = GROUP) -> None:
    errors = await groups.offsets.txn_commit(request(offsets, group), pid, EPOCH)
    assert errors == [ErrorCode.NONE] * len(offsets)


async def plain_commit(groups: GroupCoordinator, offsets: dict[int, int]) -> None:
    assert await groups.offsets.commit(request(offsets)) == [ErrorCode.NONE] * len(offsets)


def test_offsets_become_visible_only_when_the_transaction_commits(tmp_path):
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            await plain_commit(groups, {0: 5})
            await txn_commit(groups, {0: 10, 1: 20})
            assert committed(groups) == {0: 5}
            assert groups.offsets.pending(GROUP, TOPIC, 0)
            assert groups.offsets.pending(GROUP, TOPIC, 1)
            assert not groups.offsets.pending(GROUP, TOPIC, 2)
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, True) == ErrorCode.NONE
            assert committed(groups) == {0: 10, 1: 20}
            assert not groups.offsets.pending(GROUP, TOPIC, 0)
            # a second end writes nothing and changes nothing
            end = log_end(groups)
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, False) == ErrorCode.NONE
            assert log_end(groups) == end
            assert committed(groups) == {0: 10, 1: 20}
        async with coordinator(tmp_path) as groups:  # the COMMIT marker replayed
            assert committed(groups) == {0: 10, 1: 20}
            assert not groups.offsets.pending(GROUP, TOPIC, 0)
    asyncio.run(body())


def test_an_abort_drops_the_pending_offsets(tmp_path):
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            await plain_commit(groups, {0: 5})
            await txn_commit(groups, {0: 10, 1: 20})
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, False) == ErrorCode.NONE
            assert committed(groups) == {0: 5}
            assert not groups.offsets.pending(GROUP, TOPIC, 1)
        async with coordinator(tmp_path) as groups:  # the ABORT marker replayed
            assert committed(groups) == {0: 5}
            assert not groups.offsets.pending(GROUP, TOPIC, 0)
    asyncio.run(body())


def test_pending_offsets_survive_a_restart_and_end_after_it(tmp_path):
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            await txn_commit(groups, {1: 20})
            await txn_commit(groups, {1: 21, 2: 30})  # a later write of a partition replaces
            await txn_commit(groups, {2: 7}, pid=PID + 1)  # another transaction, aborted later
        async with coordinator(tmp_path) as groups:
            assert GROUP in groups.groups  # a simple group, as Kafka's replay makes it
            assert committed(groups) == {}
            assert groups.offsets.pending(GROUP, TOPIC, 1)
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, True) == ErrorCode.NONE
            assert committed(groups) == {1: 21, 2: 30}
            assert groups.offsets.pending(GROUP, TOPIC, 2)  # PID + 1's is still open
            assert not groups.offsets.pending(GROUP, TOPIC, 1)
        async with coordinator(tmp_path) as groups:
            assert committed(groups) == {1: 21, 2: 30}
            assert groups.offsets.pending(GROUP, TOPIC, 2)
            assert await groups.offsets.end_txn(GROUP, PID + 1, EPOCH, False) == ErrorCode.NONE
        async with coordinator(tmp_path) as groups:
            assert committed(groups) == {1: 21, 2: 30}
            assert not groups.offsets.pending(GROUP, TOPIC, 2)
    asyncio.run(body())


def test_the_later_record_wins_between_plain_and_transactional_commits(tmp_path):
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            await txn_commit(groups, {0: 10})  # written before the plain commit: loses
            await plain_commit(groups, {0: 20, 1: 20})
            await txn_commit(groups, {1: 30})  # written after it: wins
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, True) == ErrorCode.NONE
            assert committed(groups) == {0: 20, 1: 30}
        async with coordinator(tmp_path) as groups:
            assert committed(groups) == {0: 20, 1: 30}
    asyncio.run(body())


def test_a_marker_ends_the_transaction_for_every_group_of_its_partition(tmp_path):
    """Kafka keys pending offsets by producer id within a partition of __consumer_offsets:
    the marker written there for one group ends the producer's offsets of the others."""
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            partition = groups.topic.partition_for(GROUP)
            other = next(g for g in (f"group-{i}" for i in range(100))
                         if groups.topic.partition_for(g) == partition and g != GROUP)
            await txn_commit(groups, {0: 1})
            await txn_commit(groups, {0: 2}, group=other)
            assert await groups.offsets.end_txn_in(partition, PID, EPOCH, True) == \
                ErrorCode.NONE
            assert (committed(groups), committed(groups, other)) == ({0: 1}, {0: 2})
            end = log_end(groups)
            assert await groups.offsets.end_txn(other, PID, EPOCH, True) == ErrorCode.NONE
            assert log_end(groups) == end
        async with coordinator(tmp_path) as groups:
            assert (committed(groups), committed(groups, other)) == ({0: 1}, {0: 2})
    asyncio.run(body())


def test_deleting_offsets_drops_pending_ones_and_keeps_the_group_while_open(tmp_path):
    async def body() -> None:
        async with coordinator(tmp_path) as groups:
            await txn_commit(groups, {0: 10, 1: 11})
            assert GROUP not in groups.offsets.groups_without_offsets()  # in a transaction
            error, errors = await groups.offsets.delete(GROUP, [(TOPIC, [0])])
            assert (error, errors) == (ErrorCode.NONE, [[ErrorCode.NONE]])
            assert not groups.offsets.pending(GROUP, TOPIC, 0)
            assert groups.offsets.pending(GROUP, TOPIC, 1)
        async with coordinator(tmp_path) as groups:  # the tombstone replayed after the record
            assert not groups.offsets.pending(GROUP, TOPIC, 0)
            assert groups.offsets.pending(GROUP, TOPIC, 1)
            assert await groups.offsets.end_txn(GROUP, PID, EPOCH, True) == ErrorCode.NONE
            assert committed(groups) == {1: 11}
    asyncio.run(body())


# ---- over the wire -------------------------------------------------------------------------

(INIT_PID, ADD_OFFSETS, END_TXN, TXN_COMMIT, OFFSET_COMMIT, OFFSET_FETCH, JOIN, SYNC,
 CREATE_TOPICS, HEARTBEAT) = (22, 25, 26, 28, 8, 9, 11, 14, 19, 68)
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offset.metadata.max.bytes": "64",
            "offsets.topic.num.partitions": "3"}


def req(name: str):
    return messages.get(name + "Request").cls


InitPid, AddOffsets, EndTxn, TxnCommit = (req("InitProducerId"), req("AddOffsetsToTxn"),
                                          req("EndTxn"), req("TxnOffsetCommit"))
OffsetCommit, OffsetFetch, Join, Sync, Create, Heartbeat = (
    req("OffsetCommit"), req("OffsetFetch"), req("JoinGroup"), req("SyncGroup"),
    req("CreateTopics"), req("ConsumerGroupHeartbeat"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("txn-offsets") / "data", SETTINGS)
    process.start()
    with WireClient(process.bootstrap) as client:
        create_topic(client)
    yield process
    assert process.stop() == 0, process.log_tail()


def create_topic(client: WireClient) -> None:
    response = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name=TOPIC, num_partitions=3, replication_factor=1)], timeout_ms=5000))
    assert response.topics[0].error_code == ErrorCode.NONE


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Txn:
    """A transactional producer's side of the wire: InitProducerId, AddOffsetsToTxn,
    TxnOffsetCommit, EndTxn."""

    def __init__(self, client: WireClient, txn_id: str | None = None) -> None:
        self.client, self.txn_id = client, txn_id or unique("txn")
        response = client.request(INIT_PID, 3, InitPid(
            transactional_id=self.txn_id, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1))
        assert response.error_code == ErrorCode.NONE
        self.pid, self.epoch = response.producer_id, response.producer_epoch

    def add_offsets(self, group: str) -> ErrorCode:
        return self.client.request(ADD_OFFSETS, 3, AddOffsets(
            transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch,
            group_id=group)).error_code

    def commit_offsets(self, group: str, offsets: dict[int, int], *, version: int = 3,
                       topics: tuple[str, ...] = (TOPIC,), metadata: str = "",
                       generation: int = -1, member: str = "", instance: str | None = None,
                       pid: int | None = None, epoch: int | None = None,
                       txn_id: str | None = None) -> dict[tuple[str, int], ErrorCode]:
        response = self.client.request(TXN_COMMIT, version, TxnCommit(
            transactional_id=txn_id or self.txn_id, group_id=group,
            producer_id=self.pid if pid is None else pid,
            producer_epoch=self.epoch if epoch is None else epoch, generation_id=generation,
            member_id=member, group_instance_id=instance, topics=[
                TxnCommit.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                    TxnCommit.TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                        committed_metadata=metadata) for p, o in offsets.items()])
                for topic in topics]))
        return {(t.name, p.partition_index): p.error_code
                for t in response.topics for p in t.partitions}

    def end(self, commit: bool) -> ErrorCode:
        return self.client.request(END_TXN, 3, EndTxn(
            transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch,
            committed=commit)).error_code


def fetch(client: WireClient, group: str, *, stable: bool = False, version: int = 8,
          partitions: tuple[int, ...] = (0, 1, 2)) -> dict[int, tuple[int, ErrorCode]]:
    """(committed offset, error) per partition of TOPIC."""
    topics = [OffsetFetch.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=list(partitions))]
    if version >= 8:
        response = client.request(OFFSET_FETCH, version, OffsetFetch(
            groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=topics)],
            require_stable=stable))
        parts = response.groups[0].topics[0].partitions
    else:
        response = client.request(OFFSET_FETCH, version, OffsetFetch(
            group_id=group, topics=[OffsetFetch.OffsetFetchRequestTopic(
                name=TOPIC, partition_indexes=list(partitions))], require_stable=stable))
        parts = response.topics[0].partitions
    return {p.partition_index: (p.committed_offset, p.error_code) for p in parts}


def plain_commit_wire(client: WireClient, group: str, offsets: dict[int, int]) -> None:
    response = client.request(OFFSET_COMMIT, 9, OffsetCommit(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[OffsetCommit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            OffsetCommit.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                committed_metadata="") for p, o in offsets.items()])]))
    assert {p.error_code for p in response.topics[0].partitions} == {ErrorCode.NONE}


OK = ErrorCode.NONE
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_offsets_of_a_transaction_over_the_wire(client, commit):
    group, txn = unique("g"), Txn(client)
    plain_commit_wire(client, group, {0: 5})
    assert txn.add_offsets(group) == OK
    assert txn.commit_offsets(group, {0: 10, 1: 20}) == {(TOPIC, 0): OK, (TOPIC, 1): OK}
    # require_stable: the pending partitions are unstable, the other one is answered
    assert fetch(client, group, stable=True) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE),
                                                 2: (-1, OK)}
    assert fetch(client, group, stable=True, version=7) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE),
                                                            2: (-1, OK)}
    assert fetch(client, group) == {0: (5, OK), 1: (-1, OK), 2: (-1, OK)}  # not yet visible
    assert txn.end(commit) == OK
    expected = {0: (10, OK), 1: (20, OK)} if commit else {0: (5, OK), 1: (-1, OK)}
    assert fetch(client, group, stable=True) == {**expected, 2: (-1, OK)}


def partition_of(group: str) -> int:
    return (java_hash(group) & 0x7FFFFFFF) % 3  # offsets.topic.num.partitions of broker


def test_the_producer_is_checked_before_anything_is_written(client):
    group, txn = unique("g"), Txn(client)
    assert txn.commit_offsets(group, {0: 1}) == {(TOPIC, 0): ErrorCode.INVALID_TXN_STATE}
    assert txn.add_offsets(group) == OK
    # a group whose offsets partition is not in the transaction (the coordinator checks the
    # partition, as Kafka's verification does: a group sharing it would pass)
    other = next(name for name in (unique("g") for _ in range(100))
                 if partition_of(name) != partition_of(group))
    assert txn.commit_offsets(other, {0: 1}) == {(TOPIC, 0): ErrorCode.INVALID_TXN_STATE}
    assert txn.commit_offsets(group, {0: 1}, pid=txn.pid + 1000) == \
        {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert txn.commit_offsets(group, {0: 1}, txn_id=unique("unknown")) == \
        {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert txn.commit_offsets("", {0: 1}) == {(TOPIC, 0): ErrorCode.INVALID_GROUP_ID}
    fenced = Txn(client, txn.txn_id)  # the same transactional id again: the first is fenced
    assert fenced.epoch > txn.epoch
    assert txn.commit_offsets(group, {0: 1}) == {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    for g in (group, other):
        assert fetch(client, g, stable=True) == {p: (-1, OK) for p in range(3)}


def test_partition_errors_and_metadata_limit(client):
    group, txn = unique("g"), Txn(client)
    assert txn.add_offsets(group) == OK
    result = txn.commit_offsets(group, {0: 7, 3: 7}, topics=(TOPIC, "no-such-topic"))
    assert result == {(TOPIC, 0): OK, (TOPIC, 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("no-such-topic", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert txn.commit_offsets(group, {1: 8}, metadata="m" * 65) == \
        {(TOPIC, 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert fetch(client, group, stable=True)[1] == (-1, OK)  # nothing pending for it
    assert txn.end(True) == OK
    assert fetch(client, group, stable=True) == {0: (7, OK), 1: (-1, OK), 2: (-1, OK)}


def stable_member(client: WireClient, group: str, instance: str | None = None):
    """A one-member Stable classic group; returns the JoinGroup response."""
    def join(member_id: str):
        return client.request(JOIN, 9, Join(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=10_000,
            member_id=member_id, group_instance_id=instance, protocol_type="consumer",
            protocols=[Join.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
    joined = join("")
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394, dynamic members
        joined = join(joined.member_id)
    assert joined.error_code == OK
    synced = client.request(SYNC, 5, Sync(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id=instance, protocol_type="consumer", protocol_name="range",
        assignments=[Sync.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                     assignment=b"a")]))
    assert synced.error_code == OK
    return joined


def test_group_member_checks(client):
    group, txn = unique("g"), Txn(client)
    member = stable_member(client, group, instance="host-1")
    gen, mid = member.generation_id, member.member_id
    assert txn.add_offsets(group) == OK

    def commit(**kwargs) -> ErrorCode:
        [error] = txn.commit_offsets(group, {0: 3}, **kwargs).values()
        return error
    assert commit(generation=gen + 1, member=mid, instance="host-1") == \
        ErrorCode.ILLEGAL_GENERATION
    assert commit(generation=gen, member="someone-else") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(generation=gen, member="someone-else", instance="host-1") == \
        ErrorCode.FENCED_INSTANCE_ID
    assert fetch(client, group, stable=True)[0] == (-1, OK)  # none of those was written
    # v0-2 carry no member: accepted, as is a v3 commit without one (Kafka does not check the
    # group's state for transactional commits)
    assert commit(version=2) == OK
    assert commit(generation=-1) == OK
    assert commit(generation=gen, member=mid, instance="host-1") == OK
    missing = unique("g")  # a generation for a group that does not exist
    assert txn.add_offsets(missing) == OK
    assert txn.commit_offsets(missing, {0: 3}, generation=1, member="m") == \
        {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    assert txn.end(True) == OK
    assert fetch(client, group)[0] == (3, OK)


def test_consumer_group_member_epoch_checks(client):
    """KIP-848 groups: the member epoch is checked; a stale one is ILLEGAL_GENERATION
    (Kafka's validateTransactionalOffsetCommit turns STALE_MEMBER_EPOCH into it)."""
    group, txn = unique("cg"), Txn(client)
    joined = client.request(HEARTBEAT, 0, Heartbeat(
        group_id=group, member_id="", member_epoch=0, instance_id=None,
        rebalance_timeout_ms=30_000, server_assignor=None, subscribed_topic_names=[TOPIC],
        topic_partitions=[]))
    assert joined.error_code == OK and joined.member_epoch > 0
    mid, epoch = joined.member_id, joined.member_epoch
    assert txn.add_offsets(group) == OK

    def commit(**kwargs) -> ErrorCode:
        [error] = txn.commit_offsets(group, {1: 9}, **kwargs).values()
        return error
    assert commit(generation=epoch + 1, member=mid) == ErrorCode.ILLEGAL_GENERATION
    assert commit(generation=epoch, member="nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(version=2) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has a member
    assert fetch(client, group, stable=True)[1] == (-1, OK)
    assert commit(generation=epoch, member=mid) == OK
    assert fetch(client, group, stable=True)[1] == (-1, UNSTABLE)
    assert txn.end(True) == OK
    assert fetch(client, group, stable=True)[1] == (9, OK)


def test_pending_offsets_survive_a_sigkill_and_commit_after_it(tmp_path):
    process = BrokerProcess(tmp_path / "data", SETTINGS).start()
    try:
        group = unique("g")
        with WireClient(process.bootstrap) as client:
            create_topic(client)
            txn = Txn(client)
            assert txn.add_offsets(group) == OK
            assert txn.commit_offsets(group, {0: 42}) == {(TOPIC, 0): OK}
        process.kill()
        process.start()
        with WireClient(process.bootstrap) as client:
            assert fetch(client, group, stable=True)[0] == (-1, UNSTABLE)
            assert fetch(client, group)[0] == (-1, OK)
            txn.client = client
            assert txn.end(True) == OK
            assert fetch(client, group, stable=True)[0] == (42, OK)
        process.kill()
        process.start()
        with WireClient(process.bootstrap) as client:
            assert fetch(client, group, stable=True)[0] == (42, OK)
    finally:
        process.kill()


# ---- confluent-kafka -----------------------------------------------------------------------

def test_confluent_send_offsets_to_transaction(broker):
    """librdkafka's read-process-write commit: ``send_offsets_to_transaction`` (AddOffsetsToTxn
    and TxnOffsetCommit), then commit or abort; its ``committed`` asks OffsetFetch with
    require_stable (read_committed, its default)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    bootstrap, group = broker.bootstrap, unique("g")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn"),
                         "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        producer.init_transactions(30)

        def transaction(offset: int, commit: bool) -> None:
            producer.begin_transaction()
            producer.produce(TOPIC, value=b"processed %d" % offset, partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(TOPIC, 0, offset), TopicPartition(TOPIC, 2, offset * 2)],
                consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)

        def committed() -> dict[int, int]:
            parts = consumer.committed([TopicPartition(TOPIC, p) for p in range(3)], 30)
            return {tp.partition: tp.offset for tp in parts if tp.offset >= 0}
        transaction(11, commit=True)
        assert committed() == {0: 11, 2: 22}
        transaction(40, commit=False)
        assert committed() == {0: 11, 2: 22}
        transaction(50, commit=True)
        assert committed() == {0: 50, 2: 100}
    finally:
        consumer.close()
