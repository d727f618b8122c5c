"""Exact protocol semantics over the wire: long-poll wake-up, pipelining order, topic ids,
ListOffsets special timestamps, LogAppendTime topics."""
from __future__ import annotations

import threading
import time
import uuid

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    TIMESTAMP_TYPE_MASK,
    build_batch,
    decode_records,
    read_header,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 1, 2, 3, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
ListOffsets = messages.get("ListOffsetsRequest").cls
Metadata = messages.get("MetadataRequest").cls
Create = messages.get("CreateTopicsRequest").cls


def _create(client: WireClient, name: str, configs=()) -> uuid.UUID:
    result = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[Create.CreatableTopicConfig(name=k, value=v) for k, v in configs])],
        timeout_ms=5000)).topics[0]
    assert result.error_code == ErrorCode.NONE, result.error_message
    return result.topic_id


def _produce_request(topic: str, values: list[bytes], ts: int = 5_000) -> object:
    batch = build_batch([(None, v, [], ts + i) for i, v in enumerate(values)])
    return Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])


def _fetch_request(offset: int, *, topic: str = "", topic_id=None, max_wait_ms: int = 0):
    return Fetch(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
                 topics=[Fetch.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                     Fetch.FetchPartition(partition=0, fetch_offset=offset,
                                          partition_max_bytes=1 << 20)])])


def test_parked_fetch_is_woken_by_an_append(broker, client):
    _create(client, "longpoll")
    result = {}

    def fetch() -> None:
        with WireClient(broker.bootstrap, timeout_s=30.0) as other:
            # max_wait is far longer than the test's patience: only a wake-up returns data
            response = other.request(FETCH, 12, _fetch_request(0, topic="longpoll",
                                                               max_wait_ms=120_000))
            result["records"] = decode_records(bytes(response.responses[0].partitions[0].records))

    thread = threading.Thread(target=fetch)
    thread.start()
    time.sleep(0.5)  # let the fetch park (if it has not, it simply finds the data)
    client.request(PRODUCE, 9, _produce_request("longpoll", [b"wake"]))
    thread.join(20)
    assert not thread.is_alive(), "the parked fetch was not woken by the append"
    assert [r.value for r in result["records"]] == [b"wake"]


def test_pipelined_requests_are_answered_in_order(client):
    _create(client, "pipeline")
    frames = [client.frame(PRODUCE, 9, _produce_request("pipeline", [b"%d" % i]))
              for i in range(20)]
    client.send_raw(b"".join(frames))
    first = client.correlation - 19
    for i in range(20):
        data = client.read_frame()
        correlation = int.from_bytes(data[:4], "big", signed=True)
        assert correlation == first + i
        response, _ = messages.get("ProduceResponse").decode(memoryview(data), 9, 5)
        assert response.responses[0].partition_responses[0].base_offset == i


def test_topic_ids_in_metadata_and_fetch(client):
    topic_id = _create(client, "by-id")
    client.request(PRODUCE, 9, _produce_request("by-id", [b"a", b"b"]))
    by_id = client.request(METADATA, 12, Metadata(topics=[Metadata.MetadataRequestTopic(
        topic_id=topic_id, name=None)]))
    assert (by_id.topics[0].name, by_id.topics[0].topic_id) == ("by-id", topic_id)
    unknown = client.request(METADATA, 12, Metadata(topics=[Metadata.MetadataRequestTopic(
        topic_id=uuid.uuid4(), name=None)]))
    assert unknown.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    part = client.request(FETCH, 13, _fetch_request(0, topic_id=topic_id)).responses[0]
    assert [r.value for r in decode_records(bytes(part.partitions[0].records))] == [b"a", b"b"]
    missing = client.request(FETCH, 13, _fetch_request(0, topic_id=uuid.uuid4()))
    assert missing.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_metadata_v0_empty_list_means_all_and_no_auto_create_when_refused(client):
    _create(client, "listed")
    names = {t.name for t in client.request(METADATA, 0, Metadata(topics=[])).topics}
    assert "listed" in names
    refused = client.request(METADATA, 12, Metadata(topics=[Metadata.MetadataRequestTopic(
        name="not-created")], allow_auto_topic_creation=False))
    assert refused.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _list_offsets(client: WireClient, topic: str, timestamp: int, version: int = 8):
    request = ListOffsets(replica_id=-1, topics=[ListOffsets.ListOffsetsTopic(
        name=topic, partitions=[ListOffsets.ListOffsetsPartition(partition_index=0,
                                                                 timestamp=timestamp)])])
    return client.request(LIST_OFFSETS, version, request).topics[0].partitions[0]


def test_list_offsets_special_timestamps(client):
    _create(client, "offsets")
    client.request(PRODUCE, 9, _produce_request("offsets", [b"a", b"b", b"c"], ts=10_000))
    client.request(PRODUCE, 9, _produce_request("offsets", [b"d"], ts=9_000))
    assert _list_offsets(client, "offsets", -2).offset == 0
    assert _list_offsets(client, "offsets", -1).offset == 4
    assert _list_offsets(client, "offsets", -4).offset == 0
    top = _list_offsets(client, "offsets", -3)
    assert (top.offset, top.timestamp) == (2, 10_002)
    found = _list_offsets(client, "offsets", 10_001)
    assert (found.offset, found.timestamp) == (1, 10_001)
    assert _list_offsets(client, "offsets", 99_999).offset == -1
    assert _list_offsets(client, "nope", -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time_topics_stamp_the_broker_time(client):
    _create(client, "append-time", configs=[("message.timestamp.type", "LogAppendTime")])
    before = int(time.time() * 1000)
    out = client.request(PRODUCE, 9, _produce_request("append-time", [b"x", b"y"], ts=1))
    part = out.responses[0].partition_responses[0]
    assert part.log_append_time_ms >= before
    fetched = client.request(FETCH, 12, _fetch_request(0, topic="append-time"))
    body = bytes(fetched.responses[0].partitions[0].records)
    header = read_header(body)
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == part.log_append_time_ms
