"""Admin APIs over the raw wire: exact error codes and messages, every served version."""
from __future__ import annotations

import uuid

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.handlers import all_handlers
from commitgate.gateway.topic_configs import TOPIC_CONFIGS
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch

PRODUCE, FETCH, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 0, 1, 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS, CREATE_PARTITIONS = 32, 33, 35, 37
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 44, 60
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Create = messages.get("CreateTopicsRequest").cls
Delete = messages.get("DeleteTopicsRequest").cls
Partitions = messages.get("CreatePartitionsRequest").cls
Describe = messages.get("DescribeConfigsRequest").cls
Alter = messages.get("AlterConfigsRequest").cls
Incremental = messages.get("IncrementalAlterConfigsRequest").cls
Records = messages.get("DeleteRecordsRequest").cls
Cluster = messages.get("DescribeClusterRequest").cls
LogDirs = messages.get("DescribeLogDirsRequest").cls
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls


def _create(client: WireClient, name: str, partitions: int = 1) -> object:
    request = Create(topics=[Create.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1)], timeout_ms=5000)
    result = client.request(CREATE_TOPICS, 7, request).topics[0]
    assert result.error_code == ErrorCode.NONE, result
    return result


def _produce(client: WireClient, topic: str, count: int, partition: int = 0) -> object:
    batch = bytearray(build_batch([(None, b"v%d" % i, [], 1_000 + i) for i in range(count)]))
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                 records=batch)])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


def _describe(client: WireClient, rtype: int, name: str, keys=None, version: int = 4,
              synonyms: bool = False, docs: bool = False) -> object:
    request = Describe(resources=[Describe.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=docs)
    return client.request(DESCRIBE_CONFIGS, version, request).results[0]


def _alter(client: WireClient, rtype: int, name: str, configs: dict, validate_only=False,
           version: int = 2) -> object:
    request = Alter(resources=[Alter.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[Alter.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    return client.request(ALTER_CONFIGS, version, request).responses[0]


def _incremental(client: WireClient, rtype: int, name: str, ops: list, validate_only=False,
                 version: int = 1) -> object:
    request = Incremental(resources=[Incremental.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[Incremental.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, op, v in ops])], validate_only=validate_only)
    return client.request(INCREMENTAL_ALTER_CONFIGS, version, request).responses[0]


def _own(client: WireClient, topic: str) -> dict:
    """The configs set on the topic itself."""
    configs = _describe(client, TOPIC, topic).configs
    return {c.name: c.value for c in configs if c.config_source == 1}


def _delete_records(client: WireClient, topic: str, partition: int, offset: int) -> object:
    request = Records(topics=[Records.DeleteRecordsTopic(name=topic, partitions=[
        Records.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
        timeout_ms=5000)
    return client.request(DELETE_RECORDS, 2, request).topics[0].partitions[0]


# ---- DeleteTopics -----------------------------------------------------------------------------

def test_delete_topics_by_name_and_by_id_in_every_version(client):
    for version in range(1, 7):
        created = _create(client, f"w-del-{version}")
        if version >= 6:
            request = Delete(topics=[Delete.DeleteTopicState(name=None,
                                                             topic_id=created.topic_id)],
                             timeout_ms=5000)
        else:
            request = Delete(topic_names=[f"w-del-{version}"], timeout_ms=5000)
        result = client.request(DELETE_TOPICS, version, request).responses[0]
        assert (result.name, result.error_code) == (f"w-del-{version}", ErrorCode.NONE)


def test_delete_unknown_topic_id_and_name(client):
    unknown = uuid.uuid4()
    request = Delete(topics=[Delete.DeleteTopicState(name=None, topic_id=unknown),
                             Delete.DeleteTopicState(name="w-never", topic_id=None)],
                     timeout_ms=5000)
    by_id, by_name = client.request(DELETE_TOPICS, 6, request).responses
    assert (by_id.topic_id, by_id.error_code) == (unknown, ErrorCode.UNKNOWN_TOPIC_ID)
    assert by_id.error_message == "This server does not host this topic ID."
    assert (by_name.name, by_name.error_code) == ("w-never",
                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    old = client.request(DELETE_TOPICS, 1, Delete(topic_names=["w-never"], timeout_ms=1))
    assert old.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topics_invalid_entries(client):
    created = _create(client, "w-del-bad")
    request = Delete(topics=[
        Delete.DeleteTopicState(name="w-del-bad", topic_id=created.topic_id),
        Delete.DeleteTopicState(name=None, topic_id=None),
        Delete.DeleteTopicState(name="w-dup", topic_id=None),
        Delete.DeleteTopicState(name="w-dup", topic_id=None)], timeout_ms=5000)
    results = client.request(DELETE_TOPICS, 6, request).responses
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]
    assert client.request(DELETE_TOPICS, 1, Delete(topic_names=["w-del-bad"], timeout_ms=1)) \
        .responses[0].error_code == ErrorCode.NONE


def test_deleted_topic_comes_back_empty_with_a_new_id(client):
    first = _create(client, "w-recreate")
    assert _produce(client, "w-recreate", 5).base_offset == 0
    client.request(DELETE_TOPICS, 6, Delete(topics=[Delete.DeleteTopicState(
        name="w-recreate", topic_id=None)], timeout_ms=5000))
    second = _create(client, "w-recreate")
    assert second.topic_id != first.topic_id
    fetch = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                  isolation_level=0, topics=[Fetch.FetchTopic(topic="w-recreate", partitions=[
                      Fetch.FetchPartition(partition=0, fetch_offset=0,
                                           partition_max_bytes=1 << 20)])])
    part = client.request(FETCH, 11, fetch).responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 0, 0)
    assert not part.records
    assert _produce(client, "w-recreate", 1).base_offset == 0


def test_topic_deletion_disabled(tmp_path):
    with BrokerProcess(tmp_path / "data", {"delete.topic.enable": "false"}) as process, \
            WireClient(process.bootstrap) as c:
        _create(c, "kept")
        for version, code in ((1, ErrorCode.INVALID_REQUEST), (2, ErrorCode.INVALID_REQUEST),
                              (3, ErrorCode.TOPIC_DELETION_DISABLED),
                              (5, ErrorCode.TOPIC_DELETION_DISABLED)):
            result = c.request(DELETE_TOPICS, version, Delete(topic_names=["kept"],
                                                              timeout_ms=1)).responses[0]
            assert (result.name, result.error_code) == ("kept", code)
        result = c.request(DELETE_TOPICS, 6, Delete(topics=[Delete.DeleteTopicState(
            name="kept", topic_id=None)], timeout_ms=1)).responses[0]
        assert result.error_code == ErrorCode.TOPIC_DELETION_DISABLED
        assert _describe(c, TOPIC, "kept").error_code == ErrorCode.NONE


# ---- CreatePartitions --------------------------------------------------------------------------

def _grow(client: WireClient, topic: str, count: int, assignments=None, validate_only=False,
          version: int = 3) -> object:
    topic = Partitions.CreatePartitionsTopic(name=topic, count=count, assignments=assignments)
    topic.assignments = assignments  # the constructor turns None (no assignment) into []
    request = Partitions(topics=[topic], timeout_ms=5000, validate_only=validate_only)
    return client.request(CREATE_PARTITIONS, version, request).results[0]


def test_create_partitions_checks(client):
    _create(client, "w-grow", 2)
    less = _grow(client, "w-grow", 1)
    assert (less.error_code, less.error_message) == (
        ErrorCode.INVALID_PARTITIONS,
        "The topic w-grow currently has 2 partition(s); 1 would not be an increase.")
    same = _grow(client, "w-grow", 2)
    assert (same.error_code, same.error_message) == (ErrorCode.INVALID_PARTITIONS,
                                                     "Topic already has 2 partition(s).")
    assert _grow(client, "w-none", 3).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assign = Partitions.CreatePartitionsAssignment
    short = _grow(client, "w-grow", 4, [assign(broker_ids=[1])])
    assert (short.error_code, short.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
    stranger = _grow(client, "w-grow", 3, [assign(broker_ids=[7])])
    assert stranger.error_message == ("The manual partition assignment includes broker 7, but "
                                      "no such broker is registered.")
    assert _grow(client, "w-grow", 3, [assign(broker_ids=[1, 1])]).error_code == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_create_partitions_validate_only_then_for_real_in_every_version(client):
    _create(client, "w-grow-ok", 1)
    for version in range(4):
        count = 2 + version
        assert _grow(client, "w-grow-ok", count, validate_only=True,
                     version=version).error_code == ErrorCode.NONE
        assert _produce(client, "w-grow-ok", 1, partition=count - 1).error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _grow(client, "w-grow-ok", count, [Partitions.CreatePartitionsAssignment(
            broker_ids=[1])], version=version).error_code == ErrorCode.NONE
        assert _produce(client, "w-grow-ok", 1, partition=count - 1).error_code == \
            ErrorCode.NONE


# ---- DescribeConfigs -------------------------------------------------------------------------

def test_describe_topic_configs_in_every_version(client):
    _create(client, "w-desc")
    for version in range(1, 5):
        result = _describe(client, TOPIC, "w-desc", version=version, synonyms=True, docs=True)
        assert result.error_code == ErrorCode.NONE
        by_name = {c.name: c for c in result.configs}
        assert set(by_name) == set(TOPIC_CONFIGS)
        retention = by_name["retention.ms"]
        assert (retention.value, retention.config_source, retention.read_only) == \
            ("604800000", 5, False)
        assert retention.synonyms == []  # Kafka: no log.retention.ms set, so no synonym
        if version >= 3:
            assert retention.config_type == 5  # LONG
            assert retention.documentation
            assert by_name["cleanup.policy"].config_type == 7  # LIST


def test_describe_configs_subset_unknown_topic_and_bad_broker(client):
    _create(client, "w-subset")
    result = _describe(client, TOPIC, "w-subset", keys=["retention.ms", "nonexistent"])
    assert [c.name for c in result.configs] == ["retention.ms"]
    unknown = _describe(client, TOPIC, "w-nope")
    assert (unknown.error_code, unknown.configs) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    other = _describe(client, BROKER, "7")
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 1 or empty string, but received 7")
    word = _describe(client, BROKER, "x")
    assert word.error_message == "Broker id must be an integer, but it is: x"
    assert _describe(client, 8, "1").error_code == ErrorCode.INVALID_REQUEST


def test_describe_broker_configs(client, broker):
    result = _describe(client, BROKER, "1", synonyms=True, docs=True)
    by_name = {c.name: c for c in result.configs}
    for name in ("log.retention.ms", "num.partitions", "message.max.bytes",
                 "auto.create.topics.enable", "listeners", "log.dirs", "delete.topic.enable"):
        assert name in by_name
    assert by_name["listeners"].value == f"PLAINTEXT://{broker.bootstrap}"
    assert (by_name["listeners"].config_source, by_name["listeners"].read_only) == (4, True)
    assert by_name["num.partitions"].read_only
    assert not by_name["log.retention.ms"].read_only
    assert by_name["message.max.bytes"].config_type == 3  # INT
    assert by_name["auto.create.topics.enable"].value == "true"


# ---- AlterConfigs ------------------------------------------------------------------------------

def test_alter_configs_replaces_the_whole_set_in_every_version(client):
    _create(client, "w-alter")
    for version in range(3):
        assert _alter(client, TOPIC, "w-alter", {"retention.ms": "1000", "segment.ms": "5000"},
                      version=version).error_code == ErrorCode.NONE
        assert _own(client, "w-alter") == {"retention.ms": "1000", "segment.ms": "5000"}
        assert _alter(client, TOPIC, "w-alter", {"retention.bytes": "100"},
                      version=version).error_code == ErrorCode.NONE
        assert _own(client, "w-alter") == {"retention.bytes": "100"}
    assert _alter(client, TOPIC, "w-alter", {}, validate_only=True).error_code == 0
    assert _own(client, "w-alter") == {"retention.bytes": "100"}


@pytest.fixture(scope="module")
def refused_topic(broker) -> str:
    with WireClient(broker.bootstrap) as client:
        return _create(client, "w-refuse").name


@pytest.mark.parametrize(("configs", "code", "message"), [
    ({"no.such.config": "1"}, ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    ({"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "-5"}, ErrorCode.INVALID_CONFIG,
     "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ({"max.message.bytes": "3000000000"}, ErrorCode.INVALID_CONFIG,
     "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT"),
    ({"message.timestamp.type": "Now"}, ErrorCode.INVALID_CONFIG,
     ("Invalid value Now for configuration message.timestamp.type: String must be one of: "
      "CreateTime, LogAppendTime")),
    ({"preallocate": "maybe"}, ErrorCode.INVALID_CONFIG,
     ("Invalid value maybe for configuration preallocate: Expected value to be either true or "
      "false")),
    ({"retention.ms": None}, ErrorCode.INVALID_REQUEST,
     "Null value not supported for : retention.ms"),
])
def test_alter_configs_refusals(client, refused_topic, configs, code, message):
    for validate_only in (True, False):
        result = _alter(client, TOPIC, "w-refuse", configs, validate_only)
        assert (result.error_code, result.error_message) == (code, message)
    assert _own(client, "w-refuse") == {}


def test_alter_configs_resource_problems(client):
    unknown = _alter(client, TOPIC, "w-absent", {"retention.ms": "1"})
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'w-absent' does not exist.")
    assert _alter(client, TOPIC, "", {}).error_code == ErrorCode.INVALID_REQUEST
    request = Alter(resources=[Alter.AlterConfigsResource(resource_type=TOPIC,
                                                          resource_name="w-x", configs=[])] * 2,
                    validate_only=False)
    twice = client.request(ALTER_CONFIGS, 2, request).responses
    assert [(r.error_code, r.error_message) for r in twice] == [
        (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    fixed = _alter(client, BROKER, "1", {"num.partitions": "3"})
    assert (fixed.error_code, fixed.error_message) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]")
    stranger = _alter(client, BROKER, "2", {"log.retention.ms": "1"})
    assert stranger.error_message == "Unexpected broker id, expected 1, but received 2"


# ---- IncrementalAlterConfigs -----------------------------------------------------------------

def test_incremental_operations_in_every_version(client):
    _create(client, "w-inc")
    for version in range(2):
        assert _incremental(client, TOPIC, "w-inc", [("retention.ms", SET, "7"),
                                                     ("cleanup.policy", APPEND, "compact")],
                            version=version).error_code == ErrorCode.NONE
        assert _own(client, "w-inc") == {"retention.ms": "7", "cleanup.policy": "delete,compact"}
        assert _incremental(client, TOPIC, "w-inc", [("retention.ms", DELETE, None),
                                                     ("cleanup.policy", SUBTRACT, "delete")],
                            version=version).error_code == ErrorCode.NONE
        assert _own(client, "w-inc") == {"cleanup.policy": "compact"}
        _incremental(client, TOPIC, "w-inc", [("cleanup.policy", DELETE, None)])
    assert _incremental(client, TOPIC, "w-inc", [("segment.ms", SET, "9")],
                        validate_only=True).error_code == ErrorCode.NONE
    assert _own(client, "w-inc") == {}


def test_incremental_refusals(client):
    _create(client, "w-inc-bad")
    not_list = _incremental(client, TOPIC, "w-inc-bad", [("retention.ms", APPEND, "1")])
    assert (not_list.error_code, not_list.error_message) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    bad_value = _incremental(client, TOPIC, "w-inc-bad", [("cleanup.policy", APPEND, "shred")])
    assert bad_value.error_message == ("Invalid value delete,shred for configuration "
                                       "cleanup.policy: String must be one of: delete, compact")
    assert _incremental(client, TOPIC, "w-inc-bad", [("retention.ms", 9, "1")]).error_code == \
        ErrorCode.INVALID_REQUEST
    dup = _incremental(client, TOPIC, "w-inc-bad", [("retention.ms", SET, "1"),
                                                    ("retention.ms", SET, "2")])
    assert (dup.error_code, dup.error_message) == (ErrorCode.INVALID_REQUEST,
                                                   "Error due to duplicate config keys")
    broker_append = _incremental(client, BROKER, "", [("message.max.bytes", APPEND, "1")])
    assert (broker_append.error_code, broker_append.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Config value append is not allowed for config key: message.max.bytes")
    read_only = _incremental(client, BROKER, "", [("auto.create.topics.enable", SET, "false")])
    assert (read_only.error_code, read_only.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: [auto.create.topics.enable]")
    bad = _incremental(client, BROKER, "1", [("message.max.bytes", SET, "big")])
    assert bad.error_message == ("Invalid value big for configuration message.max.bytes: Not a "
                                 "number of type INT")
    assert _own(client, "w-inc-bad") == {}


def test_topic_and_broker_config_changes_take_effect(client):
    _create(client, "w-effect")
    assert _produce(client, "w-effect", 50).error_code == ErrorCode.NONE
    _incremental(client, TOPIC, "w-effect", [("max.message.bytes", SET, "100")])
    assert _produce(client, "w-effect", 50).error_code == ErrorCode.MESSAGE_TOO_LARGE
    _incremental(client, TOPIC, "w-effect", [("max.message.bytes", DELETE, None),
                                             ("message.timestamp.type", SET, "LogAppendTime")])
    stamped = _produce(client, "w-effect", 1)
    assert stamped.error_code == ErrorCode.NONE and stamped.log_append_time_ms > 0
    try:
        assert _incremental(client, BROKER, "", [("message.max.bytes", SET, "100")]) \
            .error_code == ErrorCode.NONE
        assert _produce(client, "w-effect", 50).error_code == ErrorCode.MESSAGE_TOO_LARGE
        entry = _describe(client, BROKER, "1", keys=["message.max.bytes"], synonyms=True) \
            .configs[0]
        assert (entry.value, entry.config_source) == ("100", 3)
        default = _describe(client, BROKER, "").configs
        assert [(c.name, c.value, c.config_source) for c in default] == [
            ("message.max.bytes", "100", 3), ("min.insync.replicas", "1", 3)]
        topic_view = _describe(client, TOPIC, "w-effect", keys=["max.message.bytes"]).configs[0]
        assert (topic_view.value, topic_view.config_source) == ("100", 3)
    finally:
        _incremental(client, BROKER, "", [("message.max.bytes", DELETE, None)])
    assert _produce(client, "w-effect", 50).error_code == ErrorCode.NONE


# ---- DeleteRecords ------------------------------------------------------------------------------

def test_delete_records_in_every_version(client):
    _create(client, "w-records")
    _produce(client, "w-records", 10)
    for version, offset, low in ((0, 3, 3), (1, 5, 5), (2, 4, 5)):  # never moves back
        request = Records(topics=[Records.DeleteRecordsTopic(name="w-records", partitions=[
            Records.DeleteRecordsPartition(partition_index=0, offset=offset)])], timeout_ms=1)
        part = client.request(DELETE_RECORDS, version, request).topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (ErrorCode.NONE, low)
    past = _delete_records(client, "w-records", 0, 11)
    assert (past.error_code, past.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert _delete_records(client, "w-records", 0, -2).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _delete_records(client, "w-records", 1, 0).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everything = _delete_records(client, "w-records", 0, -1)
    assert (everything.error_code, everything.low_watermark) == (ErrorCode.NONE, 10)


# ---- DescribeCluster, DescribeLogDirs ----------------------------------------------------------

def test_describe_cluster_in_every_version(client, broker):
    for version in range(3):
        response = client.request(DESCRIBE_CLUSTER, version, Cluster(
            include_cluster_authorized_operations=False, endpoint_type=1))
        assert response.error_code == ErrorCode.NONE and response.cluster_id
        assert [(b.broker_id, f"{b.host}:{b.port}") for b in response.brokers] == \
            [(1, broker.bootstrap)]
        assert response.controller_id == 1
    controllers = client.request(DESCRIBE_CLUSTER, 1, Cluster(endpoint_type=2))
    assert controllers.error_code == 114  # MISMATCHED_ENDPOINT_TYPE
    assert client.request(DESCRIBE_CLUSTER, 1, Cluster(endpoint_type=5)).error_code == 115


def test_describe_log_dirs_in_every_version(client, broker):
    _create(client, "w-dirs", 2)
    _produce(client, "w-dirs", 20, partition=1)
    for version in range(1, 6):
        request = LogDirs(topics=[LogDirs.DescribableLogDirTopic(topic="w-dirs",
                                                                 partitions=[0, 1, 9])])
        response = client.request(DESCRIBE_LOG_DIRS, version, request)
        (result,) = response.results
        assert result.log_dir == str(broker.data_dir.resolve())
        (topic,) = result.topics
        sizes = {p.partition_index: p.partition_size for p in topic.partitions}
        assert sizes[0] == 0 and sizes[1] > 20 and set(sizes) == {0, 1}
        if version >= 4:
            assert result.total_bytes > 0 and result.usable_bytes > 0
    every_topic = LogDirs()
    every_topic.topics = None  # null: all topics (the constructor turns None into [])
    everything = client.request(DESCRIBE_LOG_DIRS, 4, every_topic).results[0]
    assert "w-dirs" in {t.name for t in everything.topics}
    nothing = client.request(DESCRIBE_LOG_DIRS, 4, LogDirs(topics=[])).results[0]
    assert nothing.topics == []


def test_every_admin_api_is_advertised():
    served = all_handlers()
    for key, versions in ((20, (1, 6)), (21, (0, 2)), (32, (1, 4)), (33, (0, 2)),
                          (35, (1, 5)), (37, (0, 3)), (44, (0, 1)), (60, (0, 2))):
        assert (served[key].min_version, served[key].max_version) == versions
