"""confluent-kafka's AdminClient (librdkafka) against a real CommitGate: topics, partitions,
configs (incremental, legacy, validate-only, broker layers that survive restarts), records,
cluster."""
from __future__ import annotations

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages

TIMEOUT_S = 10
Incremental = messages.get("IncrementalAlterConfigsRequest").cls


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return _admin(broker.bootstrap)


def _wait(futures: dict) -> dict:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def _error(future) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT_S)
    return caught.value.args[0]


def _create(admin: AdminClient, name: str, partitions: int = 1) -> None:
    _wait(admin.create_topics([NewTopic(name, partitions, 1)]))


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def _consume(bootstrap: str, topic: str, partition: int, offset: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, partition, offset)])
    messages = consumer.consume(expected, TIMEOUT_S)
    consumer.close()
    return messages


def _topic_configs(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return _wait(admin.describe_configs([resource]))[resource]


def test_create_and_delete_topics(admin):
    _create(admin, "ck-life", 2)
    described = _wait(admin.describe_topics(TopicCollection(["ck-life"])))["ck-life"]
    first_id = described.topic_id
    assert len(described.partitions) == 2
    _wait(admin.delete_topics(["ck-life"]))
    assert "ck-life" not in admin.list_topics(timeout=TIMEOUT_S).topics
    error = _error(admin.delete_topics(["ck-life"])["ck-life"])
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    _create(admin, "ck-life", 1)
    again = _wait(admin.describe_topics(TopicCollection(["ck-life"])))["ck-life"]
    assert again.topic_id != first_id and len(again.partitions) == 1


def test_describe_configs_and_incremental_alter(admin):
    _create(admin, "ck-configs")
    configs = _topic_configs(admin, "ck-configs")
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-configs", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    _wait(admin.incremental_alter_configs([resource], validate_only=True))
    assert _topic_configs(admin, "ck-configs")["retention.ms"].value == "604800000"
    _wait(admin.incremental_alter_configs([resource]))
    configs = _topic_configs(admin, "ck-configs")
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, "ck-configs", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])
    error = _error(admin.incremental_alter_configs([bad])[bad])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key retention.ms because its type is not LIST." in error.str()


def test_legacy_alter_configs_replaces_everything(admin):
    _create(admin, "ck-legacy")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-legacy",
                              set_config={"retention.ms": "1000", "segment.ms": "2000"})
    _wait(admin.alter_configs([resource]))
    _wait(admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-legacy",
                                              set_config={"retention.bytes": "5"})]))
    configs = _topic_configs(admin, "ck-legacy")
    assert configs["retention.bytes"].value == "5"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    unknown = ConfigResource(ConfigResource.Type.TOPIC, "ck-legacy",
                             set_config={"no.such.config": "1"})
    error = _error(admin.alter_configs([unknown])[unknown])
    assert error.code() == KafkaError.INVALID_CONFIG
    missing = ConfigResource(ConfigResource.Type.TOPIC, "ck-missing",
                             set_config={"retention.ms": "1"})
    assert _error(admin.alter_configs([missing])[missing]).code() == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions_then_produce_to_the_new_one(admin, broker):
    _create(admin, "ck-grow")
    _wait(admin.create_partitions([NewPartitions("ck-grow", 2)], validate_only=True))
    assert len(admin.list_topics("ck-grow", timeout=TIMEOUT_S).topics["ck-grow"].partitions) == 1
    _wait(admin.create_partitions([NewPartitions("ck-grow", 2, replica_assignment=[[1]])]))
    assert len(admin.list_topics("ck-grow", timeout=TIMEOUT_S).topics["ck-grow"].partitions) == 2
    shrink = admin.create_partitions([NewPartitions("ck-grow", 1)])["ck-grow"]
    assert _error(shrink).code() == KafkaError.INVALID_PARTITIONS
    _produce(broker.bootstrap, "ck-grow", 3, partition=1)
    messages = _consume(broker.bootstrap, "ck-grow", 1, 0, 3)
    assert [(m.partition(), m.offset(), m.value()) for m in messages] == \
        [(1, i, b"v%d" % i) for i in range(3)]


def test_delete_records_then_consume_from_the_low_watermark(admin, broker):
    _create(admin, "ck-trim")
    _produce(broker.bootstrap, "ck-trim", 10)
    deleted = _wait(admin.delete_records([TopicPartition("ck-trim", 0, 4)]))
    (result,) = deleted.values()
    assert result.low_watermark == 4
    earliest = _wait(admin.list_offsets({TopicPartition("ck-trim", 0): OffsetSpec.earliest()}))
    assert [r.offset for r in earliest.values()] == [4]
    messages = _consume(broker.bootstrap, "ck-trim", 0, 4, 6)
    assert [m.offset() for m in messages] == list(range(4, 10))
    (below,) = _consume(broker.bootstrap, "ck-trim", 0, 2, 1)  # no reset policy: an error
    assert below.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert "Offset out of range" in below.error().str()
    past = admin.delete_records([TopicPartition("ck-trim", 0, 11)])
    assert _error(next(iter(past.values()))).code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster(admin, broker):
    cluster = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert cluster.cluster_id and cluster.controller.id == 1
    assert [(n.id, n.port) for n in cluster.nodes] == [(1, broker.port)]


def test_broker_config_layers_survive_a_restart(fresh_broker):
    with WireClient(fresh_broker.bootstrap) as wire:  # librdkafka cannot name "" (the cluster)
        request = Incremental(resources=[Incremental.AlterConfigsResource(
            resource_type=ConfigResource.Type.BROKER.value, resource_name="",
            configs=[Incremental.AlterableConfig(name="log.retention.ms",
                                                 config_operation=0, value="3600000")])],
            validate_only=False)
        assert wire.request(44, 1, request).responses[0].error_code == 0
    admin = _admin(fresh_broker.bootstrap)
    own = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("message.max.bytes", "500000",
                    incremental_operation=AlterConfigOpType.SET)])
    _wait(admin.incremental_alter_configs([own]))
    fixed = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    assert _error(admin.incremental_alter_configs([fixed])[fixed]).code() == \
        KafkaError.INVALID_REQUEST
    fresh_broker.restart()
    admin = _admin(fresh_broker.bootstrap)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = _wait(admin.describe_configs([resource]))[resource]
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == \
        ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == \
        ("500000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert configs["num.partitions"].is_read_only
    _create(admin, "ck-defaults")
    topic = _topic_configs(admin, "ck-defaults")
    assert (topic["retention.ms"].value, topic["max.message.bytes"].value) == \
        ("3600000", "500000")
