"""Produce validation over the wire: every batch Kafka's LogValidator refuses (and the few it
lets through that a client cannot read) is refused with Kafka's error code and never stored; a
valid batch after it takes the next offset; real clients of every codec still produce, and a
consumer reads exactly the valid records."""
from __future__ import annotations

import asyncio
import time

import lz4.frame
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    CODECS,
    MAX_DECOMPRESSION_RATIO,
    build_batch,
    decode_records,
    read_header,
)
from tests.protocol.raw_batches import batch_of, compress, field, record, seal, varint

PRODUCE, FETCH, CREATE_TOPICS = 0, 1, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
TOPIC, COMPACTED, RECENT, SMALL = "validated", "validated-compact", "validated-recent", \
    "validated-small"
SMALL_MAX = 4096
DEADLINE_S = 60


def _produce(client: WireClient, records, topic: str = TOPIC, version: int = 9):
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])
    return client.request(PRODUCE, version, request).responses[0].partition_responses[0]


def _create(client: WireClient, name: str, configs=()) -> None:
    request = Create(topics=[Create.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[Create.CreatableTopicConfig(name=k, value=v) for k, v in configs])],
        timeout_ms=5000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE


def _valid(n: int = 2) -> bytearray:
    return bytearray(build_batch([(b"k", b"ok", [], int(time.time() * 1000))] * n))


@pytest.fixture(scope="module", autouse=True)
def topics(broker) -> None:
    with WireClient(broker.bootstrap) as c:
        _create(c, TOPIC)
        _create(c, COMPACTED, [("cleanup.policy", "compact")])
        _create(c, RECENT, [("message.timestamp.before.max.ms", "3600000"),
                            ("message.timestamp.after.max.ms", "3600000")])
        _create(c, SMALL, [("max.message.bytes", str(SMALL_MAX))])


def _refused_and_not_stored(client: WireClient, batch, code: ErrorCode, topic: str = TOPIC):
    """The batch gets ``code`` and leaves no offset behind; the refusal's text names the
    partition. Returns the refusal."""
    before = _produce(client, _valid(), topic)
    assert before.error_code == ErrorCode.NONE
    refused = _produce(client, batch, topic)
    assert refused.error_code == code, refused.error_message
    assert refused.base_offset == -1
    assert f"{topic}-0" in refused.error_message
    after = _produce(client, _valid(), topic)
    assert after.base_offset == before.base_offset + 2  # nothing was stored between
    return refused


def test_a_69_byte_batch_claiming_2_31_records_is_invalid_record(client):
    batch = seal(record(0, key=b"k", value=None), 2 ** 31 - 1)
    assert len(batch) == 69
    refused = _refused_and_not_stored(client, batch, ErrorCode.INVALID_RECORD)
    assert "1 of the 2147483647 records" in refused.error_message


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_ids_are_invalid_record(client, codec):
    refused = _refused_and_not_stored(client, seal(record(0), 1, codec=codec),
                                      ErrorCode.INVALID_RECORD)
    assert f"codec id {codec}" in refused.error_message


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_compressed_payloads_are_corrupt_message(client, compression):
    payload = compress(compression, b"".join(record(i, value=b"v" * 40) for i in range(30)))
    for bad in (payload[:len(payload) // 2], payload + b"\x00\x01", b"\x07" * 40):
        _refused_and_not_stored(client, seal(bad, 30, codec=CODECS[compression]),
                                ErrorCode.CORRUPT_MESSAGE)


def test_lz4_frames_with_dependent_blocks_are_invalid_record(client):
    region = b"".join(record(i, value=bytes(range(256)) * 2) for i in range(200))
    linked = lz4.frame.compress(region, block_linked=True)
    assert linked[4] & 0x20 == 0  # block independence clear, as kafkajs's frames
    refused = _refused_and_not_stored(client, seal(linked, 200, codec=CODECS["lz4"]),
                                      ErrorCode.INVALID_RECORD)
    assert "dependent blocks" in refused.error_message


FRAMING = {
    "bad record length": (varint(0), 1),
    "record length past the end": (varint(40) + record(0)[1:], 1),
    "varint running off the end": (b"\x80\x80", 1),
    "key longer than its record": (varint(7) + b"\x00\x00\x00" + varint(60) + b"k\x00\x00", 1),
    "offset deltas out of order": (record(0) + record(1, offset_delta=0), 2),
    "trailing bytes": (record(0) + b"\x00", 1),
    "fewer records than the count": (record(0) + record(1), 3),
    "negative header count": (varint(6) + b"\x00\x00\x00" + field(b"") + field(b"")
                              + varint(-1), 1),
    "null header key": (record(0, headers=[(None, b"v")]), 1),
}


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("case", sorted(FRAMING))
def test_record_framing_errors_are_invalid_record(client, case, compression):
    region, count = FRAMING[case]
    batch = seal(compress(compression, region), count, codec=CODECS[compression])
    _refused_and_not_stored(client, batch, ErrorCode.INVALID_RECORD)


def test_records_decompressing_past_the_bound_are_message_too_large(client):
    value = b"\x00" * (MAX_DECOMPRESSION_RATIO * SMALL_MAX)
    batch = batch_of([record(0, value=value)], "zstd")
    assert len(batch) < SMALL_MAX
    refused = _refused_and_not_stored(client, batch, ErrorCode.MESSAGE_TOO_LARGE, SMALL)
    assert "max.message.bytes" in refused.error_message


def test_compacted_topic_refuses_records_without_a_key_with_record_errors(client):
    now = int(time.time() * 1000)
    batch = bytearray(build_batch([(b"a", b"1", [], now), (None, b"2", [], now),
                                   (b"c", b"3", [], now), (None, b"4", [], now)]))
    refused = _refused_and_not_stored(client, batch, ErrorCode.INVALID_RECORD, COMPACTED)
    message = f"Compacted topic cannot accept message without key in topic partition " \
              f"{COMPACTED}-0."
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == \
        [(1, message), (3, message)]
    assert refused.error_message.startswith(
        "One or more records have been rejected due to 2 record errors in total")


def test_timestamps_outside_the_topics_range_are_invalid_timestamp(client):
    now = int(time.time() * 1000)
    batch = bytearray(build_batch([(b"a", b"1", [], now), (b"b", b"2", [], 1_000),
                                   (b"c", b"3", [], now + 10 * 3_600_000)]))
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=RECENT, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    refused = client.request(PRODUCE, 9, request).responses[0].partition_responses[0]
    assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
    assert refused.error_message == "One or more records have been rejected due to invalid " \
                                    "timestamp"
    assert [e.batch_index for e in refused.record_errors] == [1, 2]
    assert refused.record_errors[0].batch_index_error_message.startswith(
        "Timestamp 1000 of message with offset 1 is out of range.")
    assert _produce(client, _valid(), RECENT).base_offset == 0  # nothing was stored


def test_the_stored_max_timestamp_is_the_newest_records(client):
    now = int(time.time() * 1000)
    batch = batch_of([record(0, timestamp_delta=5), record(1, timestamp_delta=9)],
                     base_timestamp=now, max_timestamp=now + 123_456)  # a wrong maxTimestamp
    offset = _produce(client, batch).base_offset
    assert offset >= 0
    stored = memoryview(_fetch(client, TOPIC, offset).records)
    assert read_header(stored).max_timestamp == now + 9
    assert [r.timestamp for r in decode_records(stored)][:2] == [now + 5, now + 9]


def _fetch(client: WireClient, topic: str, offset: int):
    request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                    session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                        Fetch.FetchPartition(partition=0, fetch_offset=offset,
                                             partition_max_bytes=1 << 20)])])
    part = client.request(FETCH, 12, request).responses[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return part


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_real_clients_of_every_codec_are_stored(broker, compression):
    topic = f"validated-{compression}"
    confluent = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                          "compression.type": compression, "enable.idempotence": True})
    for i in range(300):
        confluent.produce(topic, b"c-%d" % i, b"key", headers=[("h", b"x")])
    assert confluent.flush(DEADLINE_S) == 0
    kafka_python = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5,
                                 compression_type=None if compression == "none" else compression)
    try:
        futures = [kafka_python.send(topic, b"p-%d" % i, key=b"key") for i in range(300)]
        kafka_python.flush(DEADLINE_S)
        assert all(f.get(DEADLINE_S).offset >= 0 for f in futures)
    finally:
        kafka_python.close(DEADLINE_S)
    asyncio.run(_aiokafka_produce(broker.bootstrap, topic, compression))
    assert sorted(_consume_all(broker, topic, 900)) == sorted(
        [b"%s-%d" % (who, i) for who in (b"c", b"p", b"a") for i in range(300)])


async def _aiokafka_produce(bootstrap: str, topic: str, compression: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                compression_type=None if compression == "none" else compression)
    await producer.start()
    try:
        sent = [await producer.send(topic, b"a-%d" % i, key=b"key") for i in range(300)]
        assert all(m.offset >= 0 for m in await asyncio.gather(*sent))
    finally:
        await producer.stop()


def _consume_all(broker, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=1000)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(message.value for message in batch)
        return values
    finally:
        consumer.close()


def test_a_consumer_reads_only_the_valid_records(broker, client):
    """Last in this module: after every refusal above, the partition holds only valid
    batches, gapless, which a real consumer reads to the end."""
    end = _fetch(client, TOPIC, 0).high_watermark
    values = _consume_all(broker, TOPIC, end)
    assert len(values) == end > 0
    assert set(values) == {b"ok", b"v"}
