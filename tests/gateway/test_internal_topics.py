"""Internal topics over the raw wire: clients may not delete, grow, truncate, produce to or
create them; the group's committed offsets survive every attempt and a restart."""
from __future__ import annotations

import uuid

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch
from tests.gateway.test_groups_wire import commit, fetch

PRODUCE, METADATA, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 0, 3, 19, 20, 21
CREATE_PARTITIONS = 37
OFFSETS, TRANSACTIONS = "__consumer_offsets", "__transaction_state"
OFFSETS_PARTITIONS = 5
TXN_PARTITIONS = 3

Create = messages.get("CreateTopicsRequest").cls
Delete = messages.get("DeleteTopicsRequest").cls
Partitions = messages.get("CreatePartitionsRequest").cls
Records = messages.get("DeleteRecordsRequest").cls
Produce = messages.get("ProduceRequest").cls
Metadata = messages.get("MetadataRequest").cls


@pytest.fixture
def internal_broker(tmp_path) -> BrokerProcess:
    process = BrokerProcess(tmp_path / "data",
                            {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                             "transaction.state.log.num.partitions": str(TXN_PARTITIONS)})
    process.start()
    yield process
    process.kill()


def _create(client: WireClient, name: str, partitions: int, validate_only: bool = False):
    request = Create(topics=[Create.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1)],
                     timeout_ms=5000, validate_only=validate_only)
    return client.request(CREATE_TOPICS, 7, request).topics[0]


def _metadata(client: WireClient, name: str, auto_create: bool = False):
    request = Metadata(topics=[Metadata.MetadataRequestTopic(name=name)],
                       allow_auto_topic_creation=auto_create)
    return client.request(METADATA, 12, request).topics[0]


def _delete_by_name(client: WireClient, name: str, version: int):
    if version >= 6:
        request = Delete(topics=[Delete.DeleteTopicState(name=name)], timeout_ms=5000)
    else:
        request = Delete(topic_names=[name], timeout_ms=5000)
    return client.request(DELETE_TOPICS, version, request).responses[0]


def _delete_by_id(client: WireClient, topic_id: uuid.UUID):
    request = Delete(topics=[Delete.DeleteTopicState(topic_id=topic_id)], timeout_ms=5000)
    return client.request(DELETE_TOPICS, 6, request).responses[0]


def _grow(client: WireClient, name: str, count: int):
    request = Partitions(topics=[Partitions.CreatePartitionsTopic(name=name, count=count,
                                                                  assignments=None)],
                         timeout_ms=5000, validate_only=False)
    return client.request(CREATE_PARTITIONS, 3, request).results[0]


def _delete_records(client: WireClient, name: str, partition: int, offset: int):
    request = Records(topics=[Records.DeleteRecordsTopic(name=name, partitions=[
        Records.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
        timeout_ms=5000)
    return client.request(DELETE_RECORDS, 2, request).topics[0].partitions[0]


def _produce(client: WireClient, name: str, partition: int):
    batch = bytearray(build_batch([(b"k", b"v", [], 1_000)]))
    request = Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=name, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                records=batch)])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


def _refused(result, topic: str) -> None:
    assert result.error_code == ErrorCode.INVALID_REQUEST, result
    assert topic in result.error_message and "internal" in result.error_message


def test_internal_topics_refuse_deletion_growth_and_truncation(internal_broker):
    committed = [(0, 42, 3), (1, 7, 3)]
    with WireClient(internal_broker.bootstrap) as client:
        assert _create(client, "orders", 2).error_code == ErrorCode.NONE
        assert commit(client, "g", committed) == [ErrorCode.NONE, ErrorCode.NONE]
        offsets = _metadata(client, OFFSETS)
        assert offsets.error_code == ErrorCode.NONE and offsets.is_internal
        partition = next(p.partition_index for p in offsets.partitions)

        _refused(_delete_by_name(client, OFFSETS, 6), OFFSETS)
        by_id = _delete_by_id(client, offsets.topic_id)
        _refused(by_id, OFFSETS)
        assert by_id.name == OFFSETS and by_id.topic_id == offsets.topic_id
        old = _delete_by_name(client, OFFSETS, 4)  # no message before v5
        assert (old.name, old.error_code) == (OFFSETS, ErrorCode.INVALID_REQUEST)
        _refused(_grow(client, OFFSETS, OFFSETS_PARTITIONS + 1), OFFSETS)
        truncated = _delete_records(client, OFFSETS, partition, -1)
        assert (truncated.error_code, truncated.low_watermark) == \
            (ErrorCode.INVALID_TOPIC_EXCEPTION, -1)
        assert _produce(client, OFFSETS, partition).error_code == \
            ErrorCode.INVALID_TOPIC_EXCEPTION
        assert _create(client, OFFSETS, 1).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        # what clients may do to their own topics still works beside it
        assert _delete_records(client, "orders", 0, 0).error_code == ErrorCode.NONE
        assert _grow(client, "orders", 3).error_code == ErrorCode.NONE

    internal_broker.restart()
    with WireClient(internal_broker.bootstrap) as client:
        assert len(_metadata(client, OFFSETS).partitions) == OFFSETS_PARTITIONS
        assert fetch(client, "g", [0, 1]) == {0: (42, 3, "", ErrorCode.NONE),
                                              1: (7, 3, "", ErrorCode.NONE)}


def test_clients_cannot_create_internal_topics_in_another_shape(internal_broker):
    with WireClient(internal_broker.bootstrap) as client:
        for name in (OFFSETS, TRANSACTIONS):
            for validate_only in (False, True):
                _refused(_create(client, name, 1, validate_only), name)
            assert _metadata(client, name).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            deleted = _delete_by_name(client, name, 6)
            assert deleted.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # auto-creation makes each internal topic in its coordinator's shape, and no other
        for name, partitions in ((OFFSETS, OFFSETS_PARTITIONS), (TRANSACTIONS, TXN_PARTITIONS)):
            created = _metadata(client, name, auto_create=True)
            assert created.error_code == ErrorCode.NONE and created.is_internal
            assert len(created.partitions) == partitions
        assert _create(client, "orders", 2).error_code == ErrorCode.NONE
        assert commit(client, "g", [(1, 5, 1)]) == [ErrorCode.NONE]
        assert fetch(client, "g", [1]) == {1: (5, 1, "", ErrorCode.NONE)}
