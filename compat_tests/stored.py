"""What a broker stored, read over the raw wire: the batch headers of a partition, to see what a
client really sent (codec, producer id, sequences), not what it says it sent."""
from __future__ import annotations

from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages
from commitgate.protocol.record_batch import BatchHeader, iter_batch_headers

FETCH_KEY, FETCH_VERSION = 1, 12
MAX_FETCHES = 10_000
Fetch = messages.get("FetchRequest").cls


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list[BatchHeader]:
    headers: list[BatchHeader] = []
    offset = 0
    with WireClient(bootstrap) as client:
        for _ in range(MAX_FETCHES):
            request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
                            session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                                Fetch.FetchPartition(partition=partition, fetch_offset=offset,
                                                     partition_max_bytes=64 << 20)])])
            part = client.request(FETCH_KEY, FETCH_VERSION, request).responses[0].partitions[0]
            if part.error_code != 0:
                raise AssertionError(f"raw fetch of {topic}-{partition}: error {part.error_code}")
            found = list(iter_batch_headers(bytes(part.records or b"")))
            if not found:
                return headers
            headers += found
            offset = found[-1].base_offset + found[-1].offset_count
    raise AssertionError(f"{topic}-{partition} never ended")
