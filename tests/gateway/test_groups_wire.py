"""The group coordinator over the wire: the classic protocol's round trips and Kafka's error
codes for bad input, with exact versions (KIP-394 member ids, static members, batched
FindCoordinator/LeaveGroup, multi-group OffsetFetch, topic ids), and commits that survive a
SIGKILL of the broker."""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

(OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST,
 DELETE_GROUPS, OFFSET_DELETE, PRODUCE, METADATA, CREATE_TOPICS) = (
    8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 0, 3, 19)
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
            "offset.metadata.max.bytes": "64", "offsets.topic.num.partitions": "3"}


def req(name: str):
    return messages.get(name + "Request").cls


Join, Sync, Heartbeat, Leave = req("JoinGroup"), req("SyncGroup"), req("Heartbeat"), req("LeaveGroup")
Commit, Fetch, Find = req("OffsetCommit"), req("OffsetFetch"), req("FindCoordinator")
Describe, ListG, DeleteG, OffsetDel = (req("DescribeGroups"), req("ListGroups"),
                                       req("DeleteGroups"), req("OffsetDelete"))
Create = req("CreateTopics")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("groups") / "data", SETTINGS)
    process.start()
    with WireClient(process.bootstrap) as client:
        client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
            name="orders", num_partitions=3, replication_factor=1)], timeout_ms=5000))
    yield process
    assert process.stop() == 0, process.log_tail()


def all_topics(client):
    return client.request(METADATA, 12, req("Metadata")(topics=None)).topics


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def join(client, group, member_id="", version=9, instance=None, session_ms=10_000,
         protocols=(("range", b"m"),)):
    return client.request(JOIN, version, Join(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer",
        protocols=[Join.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols]))


def join_known(client, group, **kwargs):
    """KIP-394: the first JoinGroup returns the member id to join with."""
    first = join(client, group, **kwargs)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    return join(client, group, member_id=first.member_id, **kwargs)


def sync(client, group, generation, member_id, assignments=(), version=5, instance=None):
    return client.request(SYNC, version, Sync(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer", protocol_name="range",
        assignments=[Sync.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in assignments]))


def heartbeat(client, group, generation, member_id, instance=None):
    return client.request(HEARTBEAT, 4, Heartbeat(group_id=group, generation_id=generation,
                                                  member_id=member_id,
                                                  group_instance_id=instance)).error_code


def commit(client, group, partitions, generation=-1, member_id="", version=9, topic="orders",
           metadata="", instance=None):
    response = client.request(OFFSET_COMMIT, version, Commit(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance, topics=[Commit.OffsetCommitRequestTopic(
            name=topic, partitions=[Commit.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e,
                committed_metadata=metadata) for p, o, e in partitions])]))
    return [p.error_code for p in response.topics[0].partitions]


def fetch(client, group, partitions, topic="orders", version=7):
    response = client.request(OFFSET_FETCH, version, Fetch(
        group_id=group, topics=[Fetch.OffsetFetchRequestTopic(name=topic,
                                                              partition_indexes=partitions)]))
    return {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                p.error_code) for p in response.topics[0].partitions}


def stable_member(client, group, **kwargs):
    """A one-member Stable group (a static member joins at once: KIP-394 is for dynamic ones)."""
    joined = join(client, group, **kwargs) if kwargs.get("instance") else \
        join_known(client, group, **kwargs)
    assert joined.error_code == ErrorCode.NONE and joined.leader == joined.member_id
    synced = sync(client, group, joined.generation_id, joined.member_id,
                  [(joined.member_id, b"assigned")], instance=kwargs.get("instance"))
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"assigned")
    return joined


# ---- FindCoordinator -----------------------------------------------------------------------

def test_find_coordinator_single_and_batched(client, broker):
    port = broker.port
    one = client.request(FIND_COORDINATOR, 3, Find(key="g", key_type=0))
    assert (one.error_code, one.port) == (ErrorCode.NONE, port)
    batched = client.request(FIND_COORDINATOR, 6, Find(key_type=0, coordinator_keys=["a", "b"]))
    assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == \
        [("a", ErrorCode.NONE, port), ("b", ErrorCode.NONE, port)]
    bad = client.request(FIND_COORDINATOR, 6, Find(key_type=7, coordinator_keys=["a"]))
    assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


# ---- the classic protocol ------------------------------------------------------------------

def test_member_id_round_trip_join_sync_heartbeat_leave(client):
    group = group_name()
    joined = stable_member(client, group)
    assert joined.generation_id == 1 and joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [joined.member_id]
    assert heartbeat(client, group, 1, joined.member_id) == ErrorCode.NONE
    assert heartbeat(client, group, 2, joined.member_id) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(client, group, 1, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    left = client.request(LEAVE, 5, Leave(group_id=group, members=[
        Leave.MemberIdentity(member_id=joined.member_id), Leave.MemberIdentity(member_id="x")]))
    assert [m.error_code for m in left.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    described = client.request(DESCRIBE, 5, Describe(groups=[group])).groups[0]
    assert (described.group_state, described.members) == ("Empty", [])


def test_join_v3_needs_no_member_id_round_trip(client):
    joined = join(client, group_name(), version=3)
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1


def test_join_errors(client):
    assert join(client, "", version=5).error_code == ErrorCode.INVALID_GROUP_ID
    assert join(client, group_name(), session_ms=50).error_code == \
        ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(client, group_name(), member_id="nobody").error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID
    assert join(client, group_name(), protocols=()).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_second_member_triggers_rebalance_and_both_get_assignments(broker, client):
    group = group_name()
    first = stable_member(client, group)
    with WireClient(broker.bootstrap) as other, ThreadPoolExecutor(2) as pool:
        second_id = join(other, group).member_id
        pending = pool.submit(join, other, group, member_id=second_id)
        while not pending.done():  # the first member learns of the rebalance by heartbeat
            code = heartbeat(client, group, first.generation_id, first.member_id)
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        rejoined = join(client, group, member_id=first.member_id)
        second = pending.result()
        assert rejoined.generation_id == second.generation_id == 2
        assert rejoined.leader == first.member_id and len(rejoined.members) == 2
        assert second.members == []
        follower = pool.submit(sync, other, group, 2, second_id)
        leader = sync(client, group, 2, first.member_id,
                      [(first.member_id, b"p0"), (second_id, b"p1")])
        assert (leader.assignment, follower.result().assignment) == (b"p0", b"p1")
    assert commit(client, group, [(0, 5, -1)], generation=1, member_id=first.member_id) == \
        [ErrorCode.ILLEGAL_GENERATION]


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced(client):
    group = group_name()
    old = stable_member(client, group, instance="host-1")
    new = join(client, group, instance="host-1")  # a restarted static member has no id
    assert new.error_code == ErrorCode.NONE and new.member_id != old.member_id
    assert new.generation_id == old.generation_id  # no rebalance
    assert new.skip_assignment  # v9: the leader is told not to assign again
    assert heartbeat(client, group, old.generation_id, new.member_id, "host-1") == ErrorCode.NONE
    assert sync(client, group, new.generation_id, new.member_id,
                instance="host-1").assignment == b"assigned"
    assert heartbeat(client, group, old.generation_id, old.member_id, "host-1") == \
        ErrorCode.FENCED_INSTANCE_ID
    assert commit(client, group, [(0, 1, -1)], generation=old.generation_id,
                  member_id=old.member_id, instance="host-1") == [ErrorCode.FENCED_INSTANCE_ID]


def test_session_expiry_empties_the_group(client):
    group = group_name()
    stable_member(client, group, session_ms=200)
    while client.request(DESCRIBE, 5, Describe(groups=[group])).groups[0].group_state != "Empty":
        pass  # bounded by the 200 ms session: the member never heartbeats


# ---- offsets -------------------------------------------------------------------------------

def test_simple_commit_round_trips_metadata_and_leader_epoch(client):
    group = group_name()
    assert commit(client, group, [(0, 42, 7), (1, 3, -1)], metadata="m1") == [ErrorCode.NONE] * 2
    assert fetch(client, group, [0, 1, 2]) == {0: (42, 7, "m1", 0), 1: (3, -1, "m1", 0),
                                               2: (-1, -1, "", 0)}


def test_commit_bad_input(client):
    group = group_name()
    assert commit(client, group, [(0, 1, -1)], topic="no-such-topic") == \
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert commit(client, group, [(3, 1, -1), (0, 1, -1)]) == \
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE]
    assert commit(client, group, [(0, 1, -1)], metadata="x" * 65) == \
        [ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert commit(client, group_name(), [(0, 1, -1)], generation=3, member_id="m") == \
        [ErrorCode.GROUP_ID_NOT_FOUND]
    assert commit(client, group_name(), [(0, 1, -1)], generation=3, member_id="m",
                  version=8) == [ErrorCode.ILLEGAL_GENERATION]
    member = stable_member(client, group)
    assert commit(client, group, [(0, 1, -1)]) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert commit(client, group, [(0, 1, -1)], generation=member.generation_id + 1,
                  member_id=member.member_id) == [ErrorCode.ILLEGAL_GENERATION]
    assert commit(client, group, [(0, 9, -1)], generation=member.generation_id,
                  member_id=member.member_id) == [ErrorCode.NONE]


def test_offset_fetch_many_groups_and_by_topic_id(client):
    first, second = group_name(), group_name()
    commit(client, first, [(0, 10, -1)])
    commit(client, second, [(1, 20, -1)])
    response = client.request(OFFSET_FETCH, 9, Fetch(groups=[
        Fetch.OffsetFetchRequestGroup(group_id=first, topics=None),
        Fetch.OffsetFetchRequestGroup(group_id=second, topics=[
            Fetch.OffsetFetchRequestTopics(name="orders", partition_indexes=[1])])]))
    got = {g.group_id: [(t.name, p.partition_index, p.committed_offset)
                        for t in g.topics for p in t.partitions] for g in response.groups}
    assert got == {first: [("orders", 0, 10)], second: [("orders", 1, 20)]}
    orders = next(t.topic_id for t in all_topics(client) if t.name == "orders")
    by_id = client.request(OFFSET_FETCH, 10, Fetch(groups=[Fetch.OffsetFetchRequestGroup(
        group_id=first, topics=[Fetch.OffsetFetchRequestTopics(topic_id=orders,
                                                               partition_indexes=[0]),
                                Fetch.OffsetFetchRequestTopics(topic_id=uuid.uuid4(),
                                                               partition_indexes=[0])])]))
    parts = [(p.committed_offset, p.error_code) for t in by_id.groups[0].topics
             for p in t.partitions]
    assert parts == [(10, ErrorCode.NONE), (-1, ErrorCode.UNKNOWN_TOPIC_ID)]


def test_describe_list_delete_groups(client):
    empty, busy = group_name(), group_name()
    commit(client, empty, [(0, 1, -1)])
    stable_member(client, busy)
    described = client.request(DESCRIBE, 6, Describe(groups=[busy, "missing"])).groups
    assert (described[0].group_state, described[0].protocol_data) == ("Stable", "range")
    assert described[0].members[0].member_assignment == b"assigned"
    assert (described[1].group_state, described[1].error_code) == \
        ("Dead", ErrorCode.GROUP_ID_NOT_FOUND)
    old = client.request(DESCRIBE, 5, Describe(groups=["missing"])).groups[0]
    assert (old.group_state, old.error_code) == ("Dead", ErrorCode.NONE)
    listed = client.request(LIST, 5, ListG(states_filter=["stable"], types_filter=["Classic"]))
    assert busy in {g.group_id for g in listed.groups}
    assert empty not in {g.group_id for g in listed.groups}
    deleted = client.request(DELETE_GROUPS, 2, DeleteG(groups_names=[empty, busy, "missing"]))
    assert [r.error_code for r in deleted.results] == \
        [ErrorCode.NONE, ErrorCode.NON_EMPTY_GROUP, ErrorCode.GROUP_ID_NOT_FOUND]
    assert fetch(client, empty, [0])[0][0] == -1


def test_offset_delete(client):
    group = group_name()
    commit(client, group, [(0, 1, -1), (1, 2, -1)])
    response = client.request(OFFSET_DELETE, 0, OffsetDel(group_id=group, topics=[
        OffsetDel.OffsetDeleteRequestTopic(name="orders", partitions=[
            OffsetDel.OffsetDeleteRequestPartition(partition_index=0)]),
        OffsetDel.OffsetDeleteRequestTopic(name="nope", partitions=[
            OffsetDel.OffsetDeleteRequestPartition(partition_index=0)])]))
    assert response.error_code == ErrorCode.NONE
    assert [p.error_code for t in response.topics for p in t.partitions] == \
        [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert {p: v[0] for p, v in fetch(client, group, [0, 1]).items()} == {0: -1, 1: 2}
    missing = client.request(OFFSET_DELETE, 0, OffsetDel(group_id="missing", topics=[]))
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_clients_cannot_produce_to_the_offsets_topic(client):
    from commitgate.protocol.record_batch import build_batch
    Produce = req("Produce")
    response = client.request(PRODUCE, 9, Produce(acks=1, timeout_ms=1000, topic_data=[
        Produce.TopicProduceData(name="__consumer_offsets", partition_data=[
            Produce.PartitionProduceData(index=0, records=bytearray(
                build_batch([(b"k", b"v", [], 0)])))])]))
    assert response.responses[0].partition_responses[0].error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION
    assert [t.is_internal for t in all_topics(client) if t.name == "__consumer_offsets"] == \
        [True]


# ---- durability ----------------------------------------------------------------------------

def test_commits_and_group_survive_sigkill(tmp_path):
    process = BrokerProcess(tmp_path / "data", SETTINGS).start()
    try:
        with WireClient(process.bootstrap) as client:
            client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
                name="orders", num_partitions=3, replication_factor=1)], timeout_ms=5000))
            member = stable_member(client, "durable", session_ms=30_000)
            assert commit(client, "durable", [(2, 99, 4)], generation=member.generation_id,
                          member_id=member.member_id, metadata="meta") == [ErrorCode.NONE]
            commit(client, "simple", [(0, 5, -1)])
            client.request(DELETE_GROUPS, 2, DeleteG(groups_names=["simple"]))
        process.kill()
        process.start()
        with WireClient(process.bootstrap) as client:
            assert fetch(client, "durable", [2]) == {2: (99, 4, "meta", 0)}
            assert fetch(client, "simple", [0])[0][0] == -1
            # the member carries on in the same generation: no rebalance after the restart
            assert heartbeat(client, "durable", member.generation_id, member.member_id) == \
                ErrorCode.NONE
            described = client.request(DESCRIBE, 5, Describe(groups=["durable"])).groups[0]
            assert (described.group_state, described.members[0].member_assignment) == \
                ("Stable", b"assigned")
    finally:
        process.kill()
