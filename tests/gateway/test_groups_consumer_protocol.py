"""KIP-848 consumer groups over the wire: the ConsumerGroupHeartbeat state machine (join with
epoch 0, server-side assignment, revocation before assignment, leave, fencing, static members),
Kafka's error codes and messages, ConsumerGroupDescribe, the group id namespace shared with
classic groups, OffsetCommit with member epochs, the whole group surviving a SIGKILL; and the
Java client (kafka-clients 3.9, ``group.protocol=consumer``) consuming a topic in a group of two
(compat_tests/drivers/java/ConsumerProtocolGroup.java, compiled with javac at test time)."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaProducer

from commitgate.compat_tests.clients import DRIVERS, _jars, need, run_tool
from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

(OFFSET_COMMIT, OFFSET_FETCH, JOIN, SYNC, LIST, METADATA, CREATE_TOPICS, HEARTBEAT,
 DESCRIBE) = (8, 9, 11, 14, 16, 3, 19, 68, 69)
TOPIC = "events"
PARTITIONS = 4
INTERVAL_MS = 250
SETTINGS = {"group.consumer.heartbeat.interval.ms": str(INTERVAL_MS),
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


def req(name: str):
    return messages.get(name + "Request").cls


Hb, Describe, Join, Sync = (req("ConsumerGroupHeartbeat"), req("ConsumerGroupDescribe"),
                            req("JoinGroup"), req("SyncGroup"))
Commit, ListG, Create = req("OffsetCommit"), req("ListGroups"), req("CreateTopics")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", SETTINGS)
    process.start()
    with WireClient(process.bootstrap) as client:
        create_topic(client)
    yield process
    assert process.stop() == 0, process.log_tail()


def create_topic(client) -> None:
    client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name=TOPIC, num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=5000))


def topic_id(client) -> uuid.UUID:
    [topic] = client.request(METADATA, 12, req("Metadata")(topics=[
        req("Metadata").MetadataRequestTopic(name=TOPIC)])).topics
    return topic.topic_id


def group_name() -> str:
    return f"cg-{uuid.uuid4().hex[:8]}"


def heartbeat(client, group, member_id="", epoch=0, owned=(), subscribed=(TOPIC,),
              rebalance_ms=30_000, instance=None, assignor=None, tid=None):
    """A full heartbeat (what a member sends on joining); pass None to leave fields out."""
    return client.request(HEARTBEAT, 0, Hb(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
        rebalance_timeout_ms=rebalance_ms, server_assignor=assignor,
        subscribed_topic_names=None if subscribed is None else list(subscribed),
        topic_partitions=None if owned is None else
        [Hb.TopicPartitions(topic_id=tid or topic_id(client), partitions=list(owned))]
        if owned else []))


def assigned(response) -> list[int] | None:
    if response.assignment is None:
        return None
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


def ok(response):
    assert response.error_code == ErrorCode.NONE, (response.error_code, response.error_message)
    return response


def describe(client, group):
    [described] = client.request(DESCRIBE, 0, Describe(group_ids=[group])).groups
    return described


# ---- the heartbeat state machine ---------------------------------------------------------------

def test_join_gets_every_partition_and_the_heartbeat_interval(client):
    group = group_name()
    first = ok(heartbeat(client, group))
    assert first.member_id and first.member_epoch == 1
    assert first.heartbeat_interval_ms == INTERVAL_MS
    assert assigned(first) == list(range(PARTITIONS))
    assert [t.topic_id for t in first.assignment.topic_partitions] == [topic_id(client)]
    # a light heartbeat (nothing changed) gets no assignment back
    again = ok(heartbeat(client, group, first.member_id, 1, owned=None, subscribed=None,
                         rebalance_ms=-1))
    assert again.member_epoch == 1 and again.assignment is None


def test_partitions_move_only_after_their_revocation_is_acknowledged(client):
    group = group_name()
    a = ok(heartbeat(client, group))
    a_id, all_parts = a.member_id, assigned(a)
    b = ok(heartbeat(client, group))
    b_id = b.member_id
    # b is in the new epoch but gets nothing yet: a still owns every partition
    assert b.member_epoch == 2 and assigned(b) == []
    asked = ok(heartbeat(client, group, a_id, 1, owned=all_parts))
    kept = assigned(asked)
    assert asked.member_epoch == 1 and len(kept) == PARTITIONS // 2  # revoke the rest first
    assert assigned(ok(heartbeat(client, group, b_id, 2, owned=[]))) in (None, [])
    assert describe(client, group).group_state == "Reconciling"
    acked = ok(heartbeat(client, group, a_id, 1, owned=kept))
    assert acked.member_epoch == 2
    got = ok(heartbeat(client, group, b_id, 2, owned=[]))
    assert got.member_epoch == 2
    assert sorted(kept + assigned(got)) == list(range(PARTITIONS))
    described = describe(client, group)
    assert (described.error_code, described.group_state, described.group_epoch,
            described.assignment_epoch, described.assignor_name) == (0, "Stable", 2, 2, "uniform")
    owners = {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions)
              for m in described.members}
    assert owners == {a_id: kept, b_id: assigned(got)}
    assert {t.topic_name for m in described.members for t in m.target_assignment.topic_partitions} \
        == {TOPIC}


def test_a_member_leaving_gives_its_partitions_back(client):
    group = group_name()
    a = ok(heartbeat(client, group))
    b = ok(heartbeat(client, group))
    kept = assigned(ok(heartbeat(client, group, a.member_id, 1, owned=assigned(a))))
    ok(heartbeat(client, group, a.member_id, 1, owned=kept))
    left = ok(heartbeat(client, group, b.member_id, -1, owned=None, subscribed=None,
                        rebalance_ms=-1))
    assert (left.member_id, left.member_epoch) == (b.member_id, -1)
    back = ok(heartbeat(client, group, a.member_id, 2, owned=kept))
    assert back.member_epoch == 3 and assigned(back) == list(range(PARTITIONS))
    assert heartbeat(client, group, b.member_id, 2).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_range_assignor_on_request(client):
    group = group_name()
    a = ok(heartbeat(client, group, assignor="range"))
    b = ok(heartbeat(client, group, assignor="range"))
    ok(heartbeat(client, group, a.member_id, 1, owned=assigned(a)))
    assert describe(client, group).assignor_name == "range"
    low = min(a.member_id, b.member_id)
    target = {m.member_id: sorted(p for t in m.target_assignment.topic_partitions
                                  for p in t.partitions) for m in describe(client, group).members}
    assert target[low] == [0, 1]  # contiguous ranges by member id


def test_fenced_epochs_and_unknown_members(client):
    group = group_name()
    a = ok(heartbeat(client, group))
    ahead = heartbeat(client, group, a.member_id, 5, owned=None)
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert ahead.error_message.startswith("The consumer group member has a greater member epoch")
    assert ahead.member_id is None and ahead.assignment is None
    ok(heartbeat(client, group))  # epoch 2: a's epoch 1 is now behind
    ok(heartbeat(client, group, a.member_id, 1, owned=assigned(a)))
    behind = heartbeat(client, group, a.member_id, 0, owned=[])
    assert behind.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(client, group, "nobody", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    missing = heartbeat(client, group_name(), "someone", 3)
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing.error_message.endswith("not found.")


@pytest.mark.parametrize(("fields", "message"), [
    ({"group": ""}, "GroupId can't be empty."),
    ({"instance": ""}, "InstanceId can't be empty."),
    ({"rebalance_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
    ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
    ({"subscribed": None}, ("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                            "non-null when (re-)joining.")),
    ({"epoch": 3}, "MemberId can't be empty."),
    ({"epoch": -2, "member_id": "m"}, "InstanceId can't be null."),
    ({"epoch": -3}, "MemberEpoch is invalid."),
])
def test_invalid_requests(client, fields, message):
    group = fields.pop("group", group_name())
    response = heartbeat(client, group, **fields)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_unsupported_assignor(client):
    response = heartbeat(client, group_name(), assignor="sticky")
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert response.error_message == \
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_static_member_leaves_for_a_while_and_returns_with_its_partitions(client):
    group = group_name()
    a = ok(heartbeat(client, group, instance="i-1"))
    taken = heartbeat(client, group, instance="i-1")
    assert taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    away = ok(heartbeat(client, group, a.member_id, -2, owned=None, subscribed=None,
                        rebalance_ms=-1, instance="i-1"))
    assert away.member_epoch == -2
    back = ok(heartbeat(client, group, instance="i-1"))
    assert back.member_id != a.member_id
    assert back.member_epoch == 1 and assigned(back) == assigned(a)  # no rebalance
    old = heartbeat(client, group, a.member_id, 1, owned=None, instance="i-1")
    assert old.error_code == ErrorCode.FENCED_INSTANCE_ID
    unknown = heartbeat(client, group, "m", 1, owned=None, instance="i-9")
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID


# ---- one namespace with classic groups ---------------------------------------------------------

def classic_join(client, group, member_id=""):
    return client.request(JOIN, 9, Join(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id=member_id, protocol_type="consumer",
        protocols=[Join.JoinGroupRequestProtocol(name="range", metadata=b"")]))


def classic_member(client, group) -> None:
    joined = classic_join(client, group, classic_join(client, group).member_id)
    assert joined.error_code == ErrorCode.NONE
    client.request(SYNC, 5, Sync(group_id=group, generation_id=joined.generation_id,
                                 member_id=joined.member_id, protocol_type="consumer",
                                 protocol_name="range", assignments=[]))


def test_classic_and_consumer_groups_share_group_ids(client):
    classic = group_name()
    classic_member(client, classic)
    refused = heartbeat(client, classic)
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {classic} is not a consumer group")
    assert describe(client, classic).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    consumer = group_name()
    ok(heartbeat(client, consumer))
    assert classic_join(client, consumer).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state)
              for g in client.request(LIST, 5, ListG(states_filter=[],
                                                     types_filter=["Consumer"])).groups}
    assert listed[consumer] == ("consumer", "consumer", "Stable") and classic not in listed


def test_an_empty_classic_group_gives_way(client):
    group = group_name()
    assert commit(client, group, -1, "", 9) == ErrorCode.NONE  # a simple commit: Empty classic
    assert ok(heartbeat(client, group)).member_epoch == 1


# ---- committed offsets with member epochs ------------------------------------------------------

def commit(client, group, epoch, member_id, version) -> ErrorCode:
    response = client.request(OFFSET_COMMIT, version, Commit(
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
        topics=[Commit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            Commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]))
    return response.topics[0].partitions[0].error_code


def test_offset_commit_checks_the_member_epoch(client):
    group = group_name()
    a = ok(heartbeat(client, group))
    assert commit(client, group, 1, a.member_id, 9) == ErrorCode.NONE
    assert commit(client, group, 0, a.member_id, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(client, group, 1, a.member_id, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert commit(client, group, 1, "nobody", 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(client, group, -1, "", 9) == ErrorCode.UNKNOWN_MEMBER_ID  # not while in use


# ---- durability --------------------------------------------------------------------------------

def members(described) -> dict[str, tuple]:
    return {m.member_id: (m.member_epoch, m.instance_id, m.subscribed_topic_names,
                          sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
                          sorted(p for t in m.target_assignment.topic_partitions
                                 for p in t.partitions))
            for m in described.members}


def test_group_survives_a_sigkill_and_members_carry_on(tmp_path):
    """Members, epochs and assignments come back from __consumer_offsets: both members go on
    heartbeating at their epochs with their partitions; one that never returns is fenced
    after the session timeout (its session restarted at load)."""
    process = BrokerProcess(tmp_path / "data", {**SETTINGS,
                                                "group.consumer.session.timeout.ms": "4000"})
    group = group_name()
    process.start()
    try:
        with WireClient(process.bootstrap) as client:
            create_topic(client)
            a = ok(heartbeat(client, group, instance="i-a"))
            b = ok(heartbeat(client, group, rebalance_ms=20_000))
            kept = assigned(ok(heartbeat(client, group, a.member_id, 1, owned=assigned(a),
                                         instance="i-a")))
            ok(heartbeat(client, group, a.member_id, 1, owned=kept, instance="i-a"))
            got = assigned(ok(heartbeat(client, group, b.member_id, 2, owned=[])))
            before = describe(client, group)
        assert (before.group_state, before.group_epoch) == ("Stable", 2)
        process.kill()
        process.start()
        with WireClient(process.bootstrap) as client:
            carry_on_after_restart(client, group, before, (a.member_id, kept), (b.member_id, got))
    finally:
        process.kill()


def carry_on_after_restart(client, group, before, a, b) -> None:
    after = describe(client, group)
    assert (after.error_code, after.group_state, after.group_epoch, after.assignment_epoch) == (
        0, "Stable", 2, 2)
    assert members(after) == members(before)
    assert members(after)[a[0]][:2] == (2, "i-a")
    for (member_id, owned), instance in ((a, "i-a"), (b, None)):
        again = ok(heartbeat(client, group, member_id, 2, owned=owned, subscribed=None,
                             rebalance_ms=-1, instance=instance))
        assert (again.member_epoch, again.assignment) == (2, None)  # nothing to change
    for _ in range(200):  # b stays away: fenced after its session, a takes everything
        alone = ok(heartbeat(client, group, a[0], 2, owned=a[1], subscribed=None,
                             rebalance_ms=-1, instance="i-a"))
        if alone.member_epoch == 3:
            break
        time.sleep(INTERVAL_MS / 1000)
    assert alone.member_epoch == 3 and assigned(alone) == list(range(PARTITIONS))
    assert list(members(describe(client, group))) == [a[0]]


# ---- the Java client -------------------------------------------------------------------------

JAVA_DRIVER = DRIVERS / "java" / "ConsumerProtocolGroup.java"
JAR_WHEEL, JAR_FOLDER = "shigawire-apache-flink-libraries", "pyflink/lib"
JARS = ["kafka-clients", "slf4j-api"]
RECORDS = 200


def run_java_group(bootstrap: str, group: str, workdir: Path) -> dict:
    javac, java = need("javac", "a JDK 17+"), need("java", "a JDK 17+")
    classpath = ":".join(_jars(JAR_WHEEL, JAR_FOLDER, JARS))
    run_tool([javac, "-d", str(workdir), "-cp", classpath, str(JAVA_DRIVER)])
    run = subprocess.run([java, "-cp", f"{classpath}:{workdir}", "ConsumerProtocolGroup",
                          bootstrap, group, TOPIC, str(RECORDS), str(PARTITIONS)],
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    [line] = [line for line in run.stdout.splitlines() if line.startswith("{")]
    return json.loads(line)


def test_java_consumers_split_a_topic_with_the_consumer_protocol(broker, tmp_path):
    group = group_name()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(RECORDS):
        producer.send(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    with WireClient(broker.bootstrap) as client:
        ends = end_offsets(client)
    report = run_java_group(broker.bootstrap, group, tmp_path)
    members = report["members"]
    assert [m["error"] for m in members] == [None, None]
    assert report["seen"] == sum(ends.values())  # every record, at least once
    held = [set(m["held"]) for m in members]
    assert all(held) and not held[0] & held[1]  # split, no partition owned twice
    with WireClient(broker.bootstrap) as client:
        assert committed(client, group) == ends  # committed over OffsetCommit v9 epochs
        assert describe(client, group).group_state == "Empty"  # both left on close


def end_offsets(client) -> dict[int, int]:
    ListOffsets = req("ListOffsets")
    response = client.request(2, 7, ListOffsets(replica_id=-1, topics=[
        ListOffsets.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsets.ListOffsetsPartition(partition_index=p, timestamp=-1)
            for p in range(PARTITIONS)])]))
    return {p.partition_index: p.offset for p in response.topics[0].partitions}


def committed(client, group) -> dict[int, int]:
    Fetch = req("OffsetFetch")
    response = client.request(OFFSET_FETCH, 7, Fetch(group_id=group, topics=[
        Fetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(PARTITIONS)))]))
    return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}
