"""DescribeConfigs sources and synonyms as a single-node Kafka 4 (KRaft, ELR on) answers them:
retention.ms shows no synonym while only log.retention.hours is set (ConfigHelper's dropWhile),
the cluster layer holds min.insync.replicas (KIP-966), KIP-1030's defaults and limits, a topic
override and a dynamically altered broker default. Raw wire for every field, confluent-kafka's
AdminClient for what a real client reads. The broker starts with `log.retention.hours=168`, as
Kafka's config/server.properties sets it."""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

CREATE_TOPICS, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 19, 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
TOPIC_SRC, DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
WEEK_MS = "604800000"
SEGMENT = str(64 << 20)  # commitlog.segment.bytes, which is segment.bytes' default here
TIMEOUT_S = 10

Create = messages.get("CreateTopicsRequest").cls
Describe = messages.get("DescribeConfigsRequest").cls
Alter = messages.get("AlterConfigsRequest").cls
Incremental = messages.get("IncrementalAlterConfigsRequest").cls


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    process = BrokerProcess(tmp_path_factory.mktemp("k4") / "data",
                            {"num.partitions": "1", "log.retention.hours": "168",
                             "commitlog.segment.bytes": SEGMENT})
    with process:
        yield process


@pytest.fixture(scope="module", autouse=True)
def topics(broker) -> None:
    with WireClient(broker.bootstrap) as wire:
        for name, configs in (("k4", {}), ("k4-own", {"retention.ms": "3600000",
                                                       "segment.bytes": "104857600"})):
            request = Create(topics=[Create.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1,
                configs=[Create.CreatableTopicConfig(name=k, value=v)
                         for k, v in configs.items()])], timeout_ms=5000)
            assert wire.request(CREATE_TOPICS, 7, request).topics[0].error_code == 0


def _describe(client: WireClient, rtype: int, name: str, keys=None, synonyms: bool = True,
              version: int = 4) -> dict:
    request = Describe(resources=[Describe.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=False)
    result = client.request(DESCRIBE_CONFIGS, version, request).results[0]
    assert result.error_code == ErrorCode.NONE, result
    return {c.name: c for c in result.configs}


def _shown(entry) -> tuple:
    """An entry as (value, source, read-only, [(synonym, value, source), ...])."""
    return (entry.value, entry.config_source, entry.read_only,
            [(s.name, s.value, s.source) for s in entry.synonyms])


def _incremental(client: WireClient, rtype: int, name: str, ops: list) -> object:
    request = Incremental(resources=[Incremental.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[Incremental.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, op, v in ops])], validate_only=False)
    return client.request(INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0]


def test_a_fresh_topic_reports_kafka_4_sources_and_synonyms(client):
    configs = _describe(client, TOPIC, "k4")
    assert _shown(configs["retention.ms"]) == (WEEK_MS, DEFAULT, False, [])
    assert _shown(configs["cleanup.policy"]) == (
        "delete", DEFAULT, False, [("log.cleanup.policy", "delete", DEFAULT)])
    assert _shown(configs["min.insync.replicas"]) == (
        "1", DYN_DEFAULT, False,
        [("min.insync.replicas", "1", DYN_DEFAULT), ("min.insync.replicas", "1", DEFAULT)])
    assert _shown(configs["segment.bytes"]) == (
        SEGMENT, DEFAULT, False, [("log.segment.bytes", SEGMENT, DEFAULT)])
    # KIP-1030's new default, behind its broker synonym
    assert _shown(configs["message.timestamp.after.max.ms"]) == (
        "3600000", DEFAULT, False, [("log.message.timestamp.after.max.ms", "3600000", DEFAULT)])
    assert _shown(configs["file.delete.delay.ms"])[3] == [
        ("log.segment.delete.delay.ms", "60000", DEFAULT)]
    # a broker config without a built-in value (log.roll.ms) shows no synonym; nor does a topic
    # config without a broker one
    assert configs["segment.ms"].synonyms == [] and configs["remote.storage.enable"].synonyms == []
    assert configs["remote.log.copy.disable"].config_type == 1  # BOOLEAN, new in Kafka 3.9
    assert not {"message.format.version", "message.downconversion.enable",
                "message.timestamp.difference.max.ms"} & set(configs)  # gone in Kafka 4
    plain = _describe(client, TOPIC, "k4", keys=["min.insync.replicas"], synonyms=False)
    assert _shown(plain["min.insync.replicas"]) == ("1", DYN_DEFAULT, False, [])


def test_a_topic_override_comes_first(client):
    configs = _describe(client, TOPIC, "k4-own", keys=["retention.ms", "segment.bytes"])
    assert _shown(configs["retention.ms"]) == (
        "3600000", TOPIC_SRC, False, [("retention.ms", "3600000", TOPIC_SRC)])
    assert _shown(configs["segment.bytes"]) == (
        "104857600", TOPIC_SRC, False,
        [("segment.bytes", "104857600", TOPIC_SRC), ("log.segment.bytes", SEGMENT, DEFAULT)])


def test_a_dynamic_cluster_default_shows_behind_and_in_front(client):
    hours = [("log.retention.hours", "168", STATIC), ("log.retention.hours", "168", DEFAULT)]
    broker = _describe(client, BROKER, "1", keys=["log.retention.ms", "log.retention.hours"])
    assert _shown(broker["log.retention.ms"]) == (None, DEFAULT, False, [])
    assert _shown(broker["log.retention.hours"]) == ("168", STATIC, True, hours)
    assert _incremental(client, BROKER, "", [("log.retention.ms", SET, "86400000")]) \
        .error_code == ErrorCode.NONE
    try:
        dynamic = [("log.retention.ms", "86400000", DYN_DEFAULT)] + hours
        assert _shown(_describe(client, TOPIC, "k4")["retention.ms"]) == (
            "86400000", DYN_DEFAULT, False, dynamic)
        assert _shown(_describe(client, TOPIC, "k4-own")["retention.ms"]) == (
            "3600000", TOPIC_SRC, False, [("retention.ms", "3600000", TOPIC_SRC)] + dynamic)
        broker = _describe(client, BROKER, "1", keys=["log.retention.ms", "log.retention.hours"])
        assert _shown(broker["log.retention.ms"]) == ("86400000", DYN_DEFAULT, False, dynamic)
        assert _shown(broker["log.retention.hours"]) == ("168", STATIC, True, hours)
        cluster = _describe(client, BROKER, "")
        assert {n: _shown(e) for n, e in cluster.items()} == {
            "log.retention.ms": ("86400000", DYN_DEFAULT, False, dynamic[:1]),
            "min.insync.replicas": ("1", DYN_DEFAULT, False,
                                    [("min.insync.replicas", "1", DYN_DEFAULT)])}
    finally:
        _incremental(client, BROKER, "", [("log.retention.ms", DELETE, None)])
    assert _shown(_describe(client, TOPIC, "k4")["retention.ms"]) == (WEEK_MS, DEFAULT, False, [])


def test_the_cluster_min_insync_replicas_stays_while_elr_is_on(client):
    removal = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    refused = _incremental(client, BROKER, "", [("min.insync.replicas", DELETE, None)])
    assert (refused.error_code, refused.error_message) == (ErrorCode.INVALID_CONFIG, removal)
    replaced = client.request(ALTER_CONFIGS, 2, Alter(resources=[Alter.AlterConfigsResource(
        resource_type=BROKER, resource_name="", configs=[Alter.AlterableConfig(
            name="message.max.bytes", value="2000000")])], validate_only=False)).responses[0]
    assert (replaced.error_code, replaced.error_message) == (ErrorCode.INVALID_CONFIG, removal)
    own = _incremental(client, BROKER, "1", [("min.insync.replicas", SET, "2")])
    assert (own.error_code, own.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    zero = _incremental(client, BROKER, "", [("min.insync.replicas", SET, "0")])
    assert (zero.error_code, zero.error_message) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1")
    assert _incremental(client, BROKER, "", [("min.insync.replicas", SET, "2")]) \
        .error_code == ErrorCode.NONE
    try:
        entry = _describe(client, TOPIC, "k4", keys=["min.insync.replicas"])
        assert _shown(entry["min.insync.replicas"]) == (
            "2", DYN_DEFAULT, False,
            [("min.insync.replicas", "2", DYN_DEFAULT), ("min.insync.replicas", "1", DEFAULT)])
        assert _describe(client, BROKER, "")["min.insync.replicas"].value == "2"
    finally:
        _incremental(client, BROKER, "", [("min.insync.replicas", SET, "1")])


def test_kip_1030_segment_bytes_minimum(client):
    request = Incremental(resources=[Incremental.AlterConfigsResource(
        resource_type=TOPIC, resource_name="k4",
        configs=[Incremental.AlterableConfig(name="segment.bytes", config_operation=SET,
                                             value="1048575")])], validate_only=True)
    answer = client.request(INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0]
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576")


def test_confluent_admin_reads_the_same_sources_and_synonyms(broker, client):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "k4-own")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    retention, isr = configs["retention.ms"], configs["min.insync.replicas"]
    assert (retention.value, retention.source) == \
        ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert [(s.name, s.value, s.source) for s in retention.synonyms.values()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)]
    assert (isr.value, isr.source) == ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert [s.name for s in configs["segment.bytes"].synonyms.values()] == [
        "segment.bytes", "log.segment.bytes"]
    cluster = ConfigResource(ConfigResource.Type.BROKER, "1")
    node = admin.describe_configs([cluster])[cluster].result(TIMEOUT_S)
    assert (node["log.retention.hours"].source, node["log.retention.hours"].is_read_only) == \
        (ConfigSource.STATIC_BROKER_CONFIG.value, True)
    assert (node["min.insync.replicas"].source, node["min.insync.replicas"].is_read_only) \
        == (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)
