"""Authorized operations as Kafka answers them without an authorizer: every operation the
resource type supports when asked for (topic 3576, group 3400, cluster 8096), the schema's
-2147483648 otherwise. Raw wire for each version rule, confluent-kafka for a real client."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

METADATA, DESCRIBE_GROUPS, DESCRIBE_CLUSTER = 3, 15, 60
TOPIC_OPS, GROUP_OPS, CLUSTER_OPS, NOT_ASKED = 3576, 3400, 8096, -2147483648
TIMEOUT_S = 10

Metadata = messages.get("MetadataRequest").cls
Groups = messages.get("DescribeGroupsRequest").cls
Cluster = messages.get("DescribeClusterRequest").cls


@pytest.fixture(scope="module")
def topic(broker) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ops-topic", 1, 1)])["ops-topic"].result(TIMEOUT_S)
    return "ops-topic"


def _metadata(client: WireClient, version: int, topics: list, topic_ops: bool,
              cluster_ops: bool) -> object:
    request = Metadata(topics=topics, allow_auto_topic_creation=False,
                       include_cluster_authorized_operations=cluster_ops,
                       include_topic_authorized_operations=topic_ops)
    return client.request(METADATA, version, request)


def test_metadata_topic_operations_when_asked(client, topic):
    missing = uuid.uuid4()
    for version in range(8, 14):
        wanted = [Metadata.MetadataRequestTopic(name=topic),
                  Metadata.MetadataRequestTopic(name="ops-nowhere")]
        if version >= 10:
            wanted.append(Metadata.MetadataRequestTopic(name=None, topic_id=missing))
        answer = _metadata(client, version, wanted, topic_ops=True, cluster_ops=False)
        ops = [(t.name, t.error_code, t.topic_authorized_operations) for t in answer.topics]
        # the unknown name is answered like a known one; an unknown id is not resolved to one
        # (its name is null, "" before v12)
        assert ops[:2] == [(topic, ErrorCode.NONE, TOPIC_OPS),
                           ("ops-nowhere", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, TOPIC_OPS)]
        if version >= 10:
            assert ops[2][1:] == (ErrorCode.UNKNOWN_TOPIC_ID, NOT_ASKED), version
        plain = _metadata(client, version, wanted[:1], topic_ops=False, cluster_ops=False)
        assert plain.topics[0].topic_authorized_operations == NOT_ASKED, version


def test_metadata_cluster_operations_only_in_v8_to_v10(client, topic):
    for version in range(8, 14):
        answer = _metadata(client, version, [], topic_ops=False, cluster_ops=True)
        expected = CLUSTER_OPS if version <= 10 else NOT_ASKED  # v11 moved it to DescribeCluster
        assert answer.cluster_authorized_operations == expected, version
        plain = _metadata(client, version, [], topic_ops=False, cluster_ops=False)
        assert plain.cluster_authorized_operations == NOT_ASKED, version


def test_describe_cluster_operations(client):
    for version in range(3):
        asked = client.request(DESCRIBE_CLUSTER, version, Cluster(
            include_cluster_authorized_operations=True, endpoint_type=1))
        assert asked.cluster_authorized_operations == CLUSTER_OPS, version
        plain = client.request(DESCRIBE_CLUSTER, version, Cluster(
            include_cluster_authorized_operations=False, endpoint_type=1))
        assert plain.cluster_authorized_operations == NOT_ASKED, version


def test_describe_groups_operations(client):
    for version in range(3, 7):
        asked = client.request(DESCRIBE_GROUPS, version, Groups(
            groups=["ops-no-group"], include_authorized_operations=True)).groups[0]
        if version < 6:  # an unknown group is "Dead" without an error, so Kafka fills them in
            assert (asked.error_code, asked.group_state, asked.authorized_operations) == \
                (ErrorCode.NONE, "Dead", GROUP_OPS), version
        else:
            assert (asked.error_code, asked.authorized_operations) == \
                (ErrorCode.GROUP_ID_NOT_FOUND, NOT_ASKED), version
        plain = client.request(DESCRIBE_GROUPS, version, Groups(
            groups=["ops-no-group"], include_authorized_operations=False)).groups[0]
        assert plain.authorized_operations == NOT_ASKED, version


def test_confluent_admin_sees_every_topic_and_cluster_operation(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_topics(TopicCollection([topic]),
                                      include_authorized_operations=True)[topic].result(TIMEOUT_S)
    assert set(described.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}
    cluster = admin.describe_cluster(include_authorized_operations=True,
                                     request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}
    without = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT_S)
    assert without.authorized_operations is None
