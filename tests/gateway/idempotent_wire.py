"""Raw-wire helpers for the idempotent-producer tests: InitProducerId, batches carrying a
producer id, epoch and sequence, produce and read back partition 0."""
from __future__ import annotations

import time

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import Record, build_batch, decode_records

PRODUCE, FETCH, INIT_PRODUCER_ID, CREATE_TOPICS = 0, 1, 22, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
InitPid = messages.get("InitProducerIdRequest").cls
Create = messages.get("CreateTopicsRequest").cls


def idempotent_batch(pid: int, seq: int, records: int = 2, *, epoch: int = 0,
                     transactional: bool = False) -> bytearray:
    now = int(time.time() * 1000)  # recent: state idle for producer.id.expiration.ms expires
    return bytearray(build_batch([(None, b"%d-%d" % (seq, i), [], now) for i in range(records)],
                                 producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 transactional=transactional))


def produce(client: WireClient, topic: str, records: bytearray, *, acks: int = 1):
    request = Produce(acks=acks, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


def fetch_partition(client: WireClient, topic: str, partition: int = 0) -> bytes:
    """The record batches of a partition from offset 0 (up to 8 MiB)."""
    request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
                    topics=[Fetch.FetchTopic(topic=topic, partitions=[Fetch.FetchPartition(
                        partition=partition, fetch_offset=0, partition_max_bytes=8 << 20)])])
    return bytes(client.request(FETCH, 12, request).responses[0].partitions[0].records or b"")


def stored(client: WireClient, topic: str, partition: int = 0) -> list[Record]:
    """Every record of a partition, in offset order (checks nothing is stored twice)."""
    records = decode_records(fetch_partition(client, topic, partition))
    assert [r.offset for r in records] == list(range(len(records)))
    return records


def create(client: WireClient, topic: str, partitions: int = 1) -> None:
    request = Create(topics=[Create.CreatableTopic(name=topic, num_partitions=partitions,
                                                   replication_factor=1)], timeout_ms=5000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE


def init_producer_id(client: WireClient, *, version: int = 4, transactional_id=None,
                     producer_id: int = -1, epoch: int = -1):
    return client.request(INIT_PRODUCER_ID, version, InitPid(
        transactional_id=transactional_id, transaction_timeout_ms=60_000,
        producer_id=producer_id, producer_epoch=epoch))
