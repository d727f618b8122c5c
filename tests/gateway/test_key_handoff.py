"""Key lookups over what produce stored: the produce handler hands the keys its validation read
from a compressed batch to the IndexBuilder (so the batch is decompressed once); every key of
every record produced, compressed or not, must be found at its batch. The broker runs as a
subprocess; after its clean stop the store is opened in this process for the lookups (no Kafka
API looks records up by key)."""
from __future__ import annotations

import asyncio
import time

from commitgate.compat_tests.wire import WireClient
from commitgate.engine import MessageStore
from commitgate.gateway import settings
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch

PRODUCE, CREATE_TOPICS = 0, 19
Produce = messages.get("ProduceRequest").cls
Create = messages.get("CreateTopicsRequest").cls
TOPIC = "keyed"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS = 60


def _key(codec: str, batch: int, i: int) -> bytes | None:
    return None if i % 5 == 0 else b"%s-%d-%d" % (codec.encode(), batch, i)


def _produce(client: WireClient, partition: int, records) -> int:
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=TOPIC, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                 records=records)])])
    out = client.request(PRODUCE, 9, request).responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.NONE, out.error_message
    return out.base_offset


def test_every_key_of_compressed_batches_produced_is_found(fresh_broker):
    now = int(time.time() * 1000)
    stored: dict[bytes, set[tuple[int, int]]] = {}
    with WireClient(fresh_broker.bootstrap) as client:
        request = Create(topics=[Create.CreatableTopic(name=TOPIC, num_partitions=2,
                                                       replication_factor=1)], timeout_ms=5000)
        assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE
        for number in range(4):
            for codec in CODECS:
                keys = [_key(codec, number, i) for i in range(RECORDS)]
                records = build_batch([(key, b"value %d " % i * 40, [], now + i)
                                       for i, key in enumerate(keys)], compression=codec)
                partition = number % 2
                base = _produce(client, partition, bytearray(records))
                for key in filter(None, keys):
                    stored.setdefault(key, set()).add((partition, base))
    assert fresh_broker.stop() == 0, fresh_broker.log_tail()
    overrides = {**fresh_broker.default_overrides, "log.dirs": str(fresh_broker.data_dir)}
    config = settings.load(None, [f"{k}={v}" for k, v in overrides.items()]).store

    async def lookups() -> None:
        store = MessageStore(config, KafkaBodyFormat())
        await store.open()
        try:
            for key, batches in stored.items():
                assert set(await store.lookup_key(TOPIC, key)) == batches, key
        finally:
            await store.close()
    asyncio.run(lookups())
    assert len(stored) == 4 * len(CODECS) * RECORDS * 4 // 5
