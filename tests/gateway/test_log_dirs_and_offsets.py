"""DescribeLogDirs sizes (counters) after produce, DeleteRecords, retention and a restart, and
ListOffsets by timestamp over compressed and uncompressed batches, over the raw wire."""
from __future__ import annotations

import time

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch
from tests.gateway.test_admin_wire import SET, TOPIC, _incremental
from tests.gateway.test_internal_topics import _create, _delete_records

PRODUCE, LIST_OFFSETS, DESCRIBE_LOG_DIRS = 0, 2, 35
MAX_TIMESTAMP, EARLIEST = -3, -2
DEADLINE_S = 60

Produce = messages.get("ProduceRequest").cls
ListOffsets = messages.get("ListOffsetsRequest").cls
LogDirs = messages.get("DescribeLogDirsRequest").cls


@pytest.fixture
def retaining_broker(tmp_path) -> BrokerProcess:
    process = BrokerProcess(tmp_path / "data", {"log.retention.check.interval.ms": "100",
                                                "commitlog.segment.bytes": str(1 << 20)})
    process.start()
    yield process
    process.kill()


def _produce(client: WireClient, topic: str, partition: int, records, compression="none"):
    batch = bytearray(build_batch(records, compression=compression))
    request = Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                 records=batch)])])
    part = client.request(PRODUCE, 9, request).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.NONE, part
    return part.base_offset


def _sizes(client: WireClient, topic: str | None = None) -> dict[tuple[str, int], int]:
    wanted = None if topic is None else [LogDirs.DescribableLogDirTopic(
        topic=topic, partitions=[0, 1])]
    (result,) = client.request(DESCRIBE_LOG_DIRS, 4, LogDirs(topics=wanted)).results
    return {(t.name, p.partition_index): p.partition_size
            for t in result.topics for p in t.partitions}


def _list_offset(client: WireClient, topic: str, timestamp: int) -> tuple[int, int]:
    request = ListOffsets(replica_id=-1, topics=[ListOffsets.ListOffsetsTopic(
        name=topic, partitions=[ListOffsets.ListOffsetsPartition(partition_index=0,
                                                                 timestamp=timestamp)])])
    part = client.request(LIST_OFFSETS, 8, request).topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE, part
    return part.offset, part.timestamp


def test_describe_log_dirs_sizes_follow_produce_deletion_retention_and_restart(
        retaining_broker):
    # every batch the same size in the CommitLog; stamped now, as retention.ms reads them
    same = [(None, b"x" * 1000, [], int(time.time() * 1000))]
    with WireClient(retaining_broker.bootstrap) as client:
        assert _create(client, "sized", 2).error_code == ErrorCode.NONE
        assert _sizes(client, "sized") == {("sized", 0): 0, ("sized", 1): 0}
        for _ in range(60):
            _produce(client, "sized", 0, same)
        for _ in range(6):
            _produce(client, "sized", 1, same)
        sizes = _sizes(client, "sized")
        entry = sizes["sized", 1] // 6
        assert entry > 1000 and sizes == {("sized", 0): 60 * entry, ("sized", 1): 6 * entry}
        assert _delete_records(client, "sized", 0, 20).error_code == ErrorCode.NONE
        assert _sizes(client, "sized")["sized", 0] == 40 * entry
        # retention.bytes keeps the last 10 batches: the log start moves to 50
        assert _incremental(client, TOPIC, "sized",
                            [("retention.bytes", SET, str(10 * entry))]).error_code == 0
        deadline = time.monotonic() + DEADLINE_S
        while _list_offset(client, "sized", EARLIEST)[0] < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _list_offset(client, "sized", EARLIEST)[0] == 50
        assert _sizes(client, "sized") == {("sized", 0): 10 * entry, ("sized", 1): 6 * entry}
    retaining_broker.restart()
    with WireClient(retaining_broker.bootstrap) as client:
        everything = _sizes(client)
        assert {k: v for k, v in everything.items() if k[0] == "sized"} == \
            {("sized", 0): 10 * entry, ("sized", 1): 6 * entry}


BATCHES = [  # (compression, timestamps): clocks go back between and within batches
    ("none", [1000, 1001, 1002, 1003, 1004]),
    ("gzip", [2000, 2001, 2002, 2003, 2004]),
    ("lz4", [1500, 1501, 1502, 1503, 1504]),
    ("zstd", [3000, 2500, 3500, 2600, 2700]),
    ("snappy", [4000, 4001, 4004, 4002, 4003]),
]


def _expected(target: int) -> tuple[int, int]:
    """Kafka's answer: in the first batch whose max timestamp reaches the target (its time
    index keeps a running maximum), the first record at or after it."""
    offset = 0
    for _, stamps in BATCHES:
        if max(stamps) >= target:
            found = next(i for i, ts in enumerate(stamps) if ts >= target)
            return offset + found, stamps[found]
        offset += len(stamps)
    return -1, -1


def test_list_offsets_by_timestamp_over_compressed_batches(broker):
    with WireClient(broker.bootstrap) as client:
        assert _create(client, "stamped", 1).error_code == ErrorCode.NONE
        for compression, stamps in BATCHES:
            _produce(client, "stamped", 0, [(None, b"v%d" % ts, [], ts) for ts in stamps],
                     compression)
        for target in (0, 1000, 1002, 1500, 2003, 2004, 2005, 2999, 3001, 3500, 3501, 4003,
                       4004, 4005):
            assert _list_offset(client, "stamped", target) == _expected(target), target
        assert _list_offset(client, "stamped", MAX_TIMESTAMP) == (22, 4004)
        assert _delete_records(client, "stamped", 0, 17).error_code == ErrorCode.NONE
        # never below the log start, with the answer's own timestamp (Kafka scans on)
        assert _list_offset(client, "stamped", 2005) == (17, 3500)
        assert _list_offset(client, "stamped", 3501) == (20, 4000)
        assert _delete_records(client, "stamped", 0, 18).error_code == ErrorCode.NONE
        assert _list_offset(client, "stamped", 3001) == (20, 4000)  # in the next batch
        assert _list_offset(client, "stamped", 2600) == (18, 2600)
