"""Bad input over the wire: Kafka's error codes for bad batches and requests, closed
connections for undecodable frames, and a broker that keeps serving afterwards."""
from __future__ import annotations

import struct

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
Versions = messages.get("ApiVersionsRequest").cls


def _batch(n: int = 3, **kwargs) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i, [], 1_000 + i) for i in range(n)], **kwargs))


def _produce(client: WireClient, topic: str, records, *, acks: int = 1, version: int = 9,
             partition: int = 0):
    request = Produce(acks=acks, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                 records=records)])])
    response = client.request(PRODUCE, version, request)
    return response.responses[0].partition_responses[0]


def _create(client: WireClient, name: str, partitions: int = 1, configs=()):
    request = Create(topics=[Create.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[Create.CreatableTopicConfig(name=k, value=v) for k, v in configs])],
        timeout_ms=5000)
    return client.request(CREATE_TOPICS, 7, request).topics[0]


def _still_serving(broker) -> None:
    with WireClient(broker.bootstrap) as client:
        response = client.request(API_VERSIONS, 3, Versions(client_software_name="t",
                                                           client_software_version="1"))
        assert response.error_code == ErrorCode.NONE


@pytest.fixture(scope="module", autouse=True)
def bad_input_topic(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        assert _create(c, "bad-input").error_code == ErrorCode.NONE


def test_valid_batch_is_stored_at_offset_zero(client):
    out = _produce(client, "bad-input", _batch())
    assert (out.error_code, out.base_offset) == (ErrorCode.NONE, 0)


def test_crc_mismatch_is_corrupt_message_and_not_stored(client):
    batch = _batch()
    batch[-1] ^= 0xFF
    out = _produce(client, "bad-input", batch)
    assert out.error_code == ErrorCode.CORRUPT_MESSAGE
    assert _produce(client, "bad-input", _batch()).base_offset == 3  # nothing was stored


def test_truncated_batch_is_corrupt_message(client):
    assert _produce(client, "bad-input", _batch()[:-5]).error_code == ErrorCode.CORRUPT_MESSAGE


def test_old_magic_is_invalid_record(client):
    batch = _batch()
    batch[16] = 1
    assert _produce(client, "bad-input", batch).error_code == ErrorCode.INVALID_RECORD


def test_two_batches_in_one_partition_are_invalid_record(client):
    assert _produce(client, "bad-input", _batch() + _batch()).error_code == \
        ErrorCode.INVALID_RECORD


def test_empty_and_null_record_sets_are_invalid_record(client):
    assert _produce(client, "bad-input", b"").error_code == ErrorCode.INVALID_RECORD
    assert _produce(client, "bad-input", None).error_code == ErrorCode.INVALID_RECORD


def test_batch_over_max_message_bytes_is_message_too_large(client):
    assert _create(client, "bad-input-small", configs=[("max.message.bytes", "2000")]
                   ).error_code == ErrorCode.NONE
    big = bytearray(build_batch([(None, b"x" * 3000, [], 1)]))
    assert _produce(client, "bad-input-small", big).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert _produce(client, "bad-input-small", _batch()).error_code == ErrorCode.NONE


def test_zstd_needs_produce_v7(client):
    zstd = _batch(compression="zstd")
    assert _produce(client, "bad-input", zstd, version=6).error_code == \
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert _produce(client, "bad-input", _batch(compression="zstd"), version=7).error_code == \
        ErrorCode.NONE


def test_unknown_topic_and_partition(client):
    assert _produce(client, "no-such-topic", _batch()).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(client, "bad-input", _batch(), partition=7).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_required_acks(client):
    assert _produce(client, "bad-input", _batch(), acks=2).error_code == \
        ErrorCode.INVALID_REQUIRED_ACKS


def test_invalid_topic_names_are_refused(client):
    for name in ("bad name", "a" * 250, ".", "..", "ü"):
        assert _create(client, name).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, name


def test_invalid_partitions_and_replication(client):
    assert _create(client, "bad-parts", partitions=0).error_code == ErrorCode.INVALID_PARTITIONS
    request = Create(topics=[Create.CreatableTopic(name="bad-rf", num_partitions=1,
                                                   replication_factor=3)], timeout_ms=1000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == \
        ErrorCode.INVALID_REPLICATION_FACTOR


def test_fetch_past_the_end_is_offset_out_of_range(client):
    request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                    session_epoch=-1, topics=[Fetch.FetchTopic(topic="bad-input", partitions=[
                        Fetch.FetchPartition(partition=0, fetch_offset=10_000,
                                             partition_max_bytes=1 << 20)])])
    part = client.request(FETCH, 12, request).responses[0].partitions[0]
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert part.high_watermark >= 3


def test_acks_zero_gets_no_response(broker):
    with WireClient(broker.bootstrap, timeout_s=1.0) as c:
        request = Produce(acks=0, timeout_ms=1000, topic_data=[Produce.TopicProduceData(
            name="bad-input", partition_data=[Produce.PartitionProduceData(
                index=0, records=_batch())])])
        c.send_raw(c.frame(PRODUCE, 9, request))
        metadata = messages.get("MetadataRequest").cls(topics=None)
        response = c.request(METADATA, 12, metadata)  # the next response is Metadata's
        assert response.brokers


def test_unsupported_api_versions_version_answers_v0_error(broker):
    with WireClient(broker.bootstrap) as c:
        frame = c.frame(API_VERSIONS, 3, Versions(client_software_name="t",
                                                   client_software_version="1"))
        frame = frame[:6] + struct.pack(">h", 99) + frame[8:]  # ask for ApiVersions v99
        c.send_raw(frame)
        data = c.read_frame()
        response, _ = messages.get("ApiVersionsResponse").decode(memoryview(data), 0, 4)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == API_VERSIONS and k.max_version >= 3 for k in response.api_keys)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 200 * 1024 * 1024) + b"x" * 10,  # above socket.request.max.bytes
    struct.pack(">i", -5),  # negative size
    struct.pack(">i", 6) + b"\x00\x00\x00\x09\x00\x00",  # too short for a header
    struct.pack(">i", 10) + struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff",  # unknown API key
    struct.pack(">i", 10) + struct.pack(">hhi", 0, 1, 1) + b"\xff\xff",  # Produce v1
    struct.pack(">i", 13) + struct.pack(">hhi", 0, 9, 1) + b"\x00\x00\x05zz",  # garbage body
])
def test_undecodable_frames_close_the_connection(broker, payload):
    with WireClient(broker.bootstrap, timeout_s=5.0) as c:
        c.send_raw(payload)
        assert c.is_closed_by_peer()
    _still_serving(broker)


def test_sigterm_stops_cleanly(fresh_broker):
    with WireClient(fresh_broker.bootstrap) as c:
        assert _create(c, "clean-stop").error_code == ErrorCode.NONE
        _produce(c, "clean-stop", _batch())
    assert fresh_broker.stop() == 0
    assert not (fresh_broker.data_dir / "abort").exists()
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as c:
        assert _produce(c, "clean-stop", _batch()).base_offset == 3
