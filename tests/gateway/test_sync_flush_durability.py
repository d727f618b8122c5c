"""Nothing acknowledged with acks=-1 under SYNC_FLUSH is lost when the broker is SIGKILLed."""
from __future__ import annotations

import random
import threading
import time

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch, decode_records

PRODUCE, FETCH, CREATE_TOPICS = 0, 1, 19
KILLS = 5
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls


def _writer(bootstrap: str, acked: list[tuple[int, bytes]], stop: threading.Event) -> None:
    """Produce acks=-1 batches until the connection dies; record what was acknowledged."""
    try:
        with WireClient(bootstrap, timeout_s=5.0) as client:
            while not stop.is_set():
                value = random.randbytes(random.randint(1, 3000))
                request = Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
                    name="durable", partition_data=[Produce.PartitionProduceData(
                        index=0, records=build_batch([(None, value, [], 1)]))])])
                out = client.request(PRODUCE, 9, request).responses[0].partition_responses[0]
                if out.error_code == ErrorCode.NONE:
                    acked.append((out.base_offset, value))
    except (ConnectionError, OSError):
        pass


def _read_all(bootstrap: str) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    with WireClient(bootstrap) as client:
        offset = 0
        for _ in range(10_000):
            request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
                            topics=[Fetch.FetchTopic(topic="durable", partitions=[
                                Fetch.FetchPartition(partition=0, fetch_offset=offset,
                                                     partition_max_bytes=8 << 20)])])
            part = client.request(FETCH, 12, request).responses[0].partitions[0]
            records = decode_records(bytes(part.records or b""))
            if not records:
                break
            found.update((r.offset, r.value) for r in records)
            offset = records[-1].offset + 1
    return found


def test_acknowledged_batches_survive_sigkill(fresh_broker):
    fresh_broker.stop()
    fresh_broker.overrides["flush.disk.type"] = "SYNC_FLUSH"
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as client:
        client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
            name="durable", num_partitions=1, replication_factor=1)], timeout_ms=5000))
    acked: list[tuple[int, bytes]] = []
    for _ in range(KILLS):
        stop = threading.Event()
        thread = threading.Thread(target=_writer, args=(fresh_broker.bootstrap, acked, stop))
        thread.start()
        time.sleep(random.uniform(0.2, 0.8))
        fresh_broker.kill()
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
        fresh_broker.start()
    assert len(acked) > KILLS
    stored = _read_all(fresh_broker.bootstrap)
    for offset, value in acked:
        assert stored.get(offset) == value, f"acknowledged offset {offset} lost or changed"
    assert sorted(stored) == list(range(len(stored)))
