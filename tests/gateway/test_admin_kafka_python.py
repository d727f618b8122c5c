"""kafka-python's KafkaAdminClient against a real CommitGate: topics, partitions, configs,
records, cluster and log dirs."""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    UnknownTopicOrPartitionError,
)

from commitgate.gateway.topic_configs import TOPIC_CONFIGS


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def _produce(bootstrap: str, topic: str, count: int, partition: int | None = None) -> list:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    sent = [producer.send(topic, value=b"v%d" % i, partition=partition).get(timeout=10)
            for i in range(count)]
    producer.close()
    return sent


def _topic_configs(admin, topic: str, **kwargs) -> dict:
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], **kwargs)
    return result["topic"][topic]


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    records = []
    for record in consumer:
        records.append(record)
        if len(records) >= expected:
            break
    consumer.close()
    return records


def test_create_describe_delete_and_recreate(admin, broker):
    admin.create_topics([NewTopic("kpa-life", 2, 1)])
    before = {t["name"]: t for t in admin.describe_topics(["kpa-life"])}["kpa-life"]
    assert len(before["partitions"]) == 2
    _produce(broker.bootstrap, "kpa-life", 3, partition=0)
    result = admin.delete_topics(["kpa-life"])
    assert [t["error_code"] for t in result["topics"]] == [0]
    assert "kpa-life" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kpa-life"])
    admin.create_topics([NewTopic("kpa-life", 1, 1)])
    after = {t["name"]: t for t in admin.describe_topics(["kpa-life"])}["kpa-life"]
    assert after["topic_id"] != before["topic_id"]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition("kpa-life", 0)
    assert consumer.end_offsets([tp]) == {tp: 0}
    consumer.close()


def test_describe_and_alter_topic_configs(admin):
    admin.create_topics([NewTopic("kpa-configs", 1, 1)])
    everything = _topic_configs(admin, "kpa-configs", config_filter="all")
    assert set(everything) == set(TOPIC_CONFIGS)
    assert everything["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert _topic_configs(admin, "kpa-configs") == {}  # nothing modified yet
    resource = ConfigResource(ConfigResourceType.TOPIC, "kpa-configs",
                              {"retention.ms": "3600000"})
    assert admin.alter_configs([resource], validate_only=True) == \
        {"topic": {"kpa-configs": "OK"}}
    assert _topic_configs(admin, "kpa-configs") == {}
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-configs",
                                        {"retention.ms": "3600000"})])
    modified = _topic_configs(admin, "kpa-configs", include_synonyms=True)
    assert modified["retention.ms"]["value"] == "3600000"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert modified["retention.ms"]["synonyms"][0] == {
        "name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    refused = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-configs",
                                                  {"retention.ms": "forever"})])
    assert refused["topic"]["kpa-configs"] == (
        f"[Error 40] {InvalidConfigurationError.__name__}: Invalid value forever for "
        f"configuration retention.ms: Not a number of type LONG")
    # the legacy, replace-everything AlterConfigs: kafka-python carries the modified keys over
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-configs",
                                        {"segment.ms": "60000"})], incremental=False)
    assert {k: v["value"] for k, v in _topic_configs(admin, "kpa-configs").items()} == \
        {"retention.ms": "3600000", "segment.ms": "60000"}
    admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa-configs",
                                        ["retention.ms", "segment.ms"])])
    assert _topic_configs(admin, "kpa-configs") == {}


def test_broker_configs(admin):
    broker_resource = ConfigResource(ConfigResourceType.BROKER, "1")
    configs = admin.describe_configs([broker_resource], config_filter="all")["broker"]["1"]
    for name in ("log.retention.ms", "num.partitions", "message.max.bytes",
                 "auto.create.topics.enable", "listeners"):
        assert name in configs
    assert configs["num.partitions"]["read_only"]
    assert not configs["log.retention.ms"]["read_only"]
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                        {"log.retention.ms": "86400000"})])
    changed = admin.describe_configs([broker_resource])["broker"]["1"]
    assert changed["log.retention.ms"]["value"] == "86400000"
    assert changed["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    with pytest.raises(ValueError):  # kafka-python refuses read-only keys itself
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                            {"num.partitions": "4"})])
    admin.reset_configs([ConfigResource(ConfigResourceType.BROKER, "1", ["log.retention.ms"])])
    assert "log.retention.ms" not in admin.describe_configs([broker_resource])["broker"]["1"]


def test_create_partitions_then_produce_to_the_new_one(admin, broker):
    admin.create_topics([NewTopic("kpa-grow", 1, 1)])
    admin.create_partitions({"kpa-grow": NewPartitions(3)}, validate_only=True)
    assert len(admin.describe_topics(["kpa-grow"])[0]["partitions"]) == 1
    admin.create_partitions({"kpa-grow": NewPartitions(3)})
    assert len(admin.describe_topics(["kpa-grow"])[0]["partitions"]) == 3
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kpa-grow": NewPartitions(2)})
    sent = _produce(broker.bootstrap, "kpa-grow", 4, partition=2)
    assert [(m.partition, m.offset) for m in sent] == [(2, i) for i in range(4)]
    records = _consume(broker.bootstrap, "kpa-grow", 3, 4)  # all on the new partition
    assert [(r.partition, r.value) for r in records] == [(2, b"v%d" % i) for i in range(4)]


def test_delete_records_moves_the_low_watermark(admin, broker):
    admin.create_topics([NewTopic("kpa-trim", 1, 1)])
    _produce(broker.bootstrap, "kpa-trim", 10)
    tp = TopicPartition("kpa-trim", 0)
    result = admin.delete_records({tp: 6})
    assert result[tp]["low_watermark"] == 6
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.beginning_offsets([tp]) == {tp: 6}
    consumer.close()
    records = _consume(broker.bootstrap, "kpa-trim", 1, 4)  # from the earliest: 6
    assert [r.offset for r in records] == [6, 7, 8, 9]


def test_describe_cluster_and_log_dirs(admin, broker):
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1 and cluster["cluster_id"]
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, broker.port)]
    admin.create_topics([NewTopic("kpa-dirs", 1, 1)])
    _produce(broker.bootstrap, "kpa-dirs", 5)
    (entry,) = admin.describe_log_dirs({"kpa-dirs": [0]})
    (log_dir,) = entry["log_dirs"]
    assert log_dir["log_dir"] == str(broker.data_dir.resolve())
    (partition,) = log_dir["topics"][0]["partitions"]
    assert partition["partition_index"] == 0 and partition["partition_size"] > 0
