"""A data directory written by a real broker, for the offline store tools' tests.

A broker subprocess with small CommitLog segments and ConsumeQueue files takes RECORDS records
(each sent and flushed alone, so each is one batch and one CommitLog entry) from kafka-python,
then stops cleanly. Tests run the tools on copies of the directory (``copy_store``).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaProducer

from commitgate.engine.commit_log import PREFIX_SIZE
from commitgate.engine.paths import StorePaths, offset_file_name
from commitgate.engine.queue_core import CQ_UNIT, UNIT_SIZE
from commitgate.launcher import BrokerProcess

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 240  # 80 a partition
VALUE_BYTES = 10_000  # 2.4 MB in all: several 1 MiB segments
SEGMENT_BYTES = 1 << 20
QUEUE_ENTRIES_PER_FILE = 32  # 3 files a partition
SEND_TIMEOUT_S = 30.0
RECORD_OVERHEAD = 70  # RecordBatch header and record framing: less than this before a value
BROKER_OVERRIDES = {"num.partitions": str(PARTITIONS), "commitlog.segment.bytes": str(SEGMENT_BYTES),
                    "consumequeue.entries.per.file": str(QUEUE_ENTRIES_PER_FILE)}


@dataclass
class Produced:
    data_dir: Path
    ends: dict[int, int]  # partition -> log end offset, from the producer's acknowledgements
    keys: int  # distinct keys produced


def write_store(root: Path) -> Produced:
    """Start a broker in ``root / "data"``, produce, stop it cleanly."""
    broker = BrokerProcess(root / "data", BROKER_OVERRIDES)
    broker.start()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
        try:
            ends = _produce(producer)
        finally:
            producer.close()
    finally:
        code = broker.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.log_tail()}"
    return Produced(broker.data_dir, ends, RECORDS)


def _produce(producer: KafkaProducer) -> dict[int, int]:
    ends: dict[int, int] = {}
    for i in range(RECORDS):
        value = i.to_bytes(4, "big") * (VALUE_BYTES // 4)
        future = producer.send(TOPIC, key=f"key-{i}".encode(), value=value,
                               partition=i % PARTITIONS)
        producer.flush()  # one record a batch: the CommitLog holds exactly RECORDS entries
        meta = future.get(timeout=SEND_TIMEOUT_S)
        ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    return ends


def copy_store(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def unit(data_dir: Path, partition: int, offset: int) -> tuple[Path, int, int, int]:
    """(queue file, position in it, phy, size) of ``offset``'s ConsumeQueue unit."""
    file_bytes = QUEUE_ENTRIES_PER_FILE * UNIT_SIZE
    start = offset * UNIT_SIZE // file_bytes * file_bytes
    path = StorePaths(data_dir).consumequeue_dir(TOPIC, partition) / offset_file_name(start)
    pos = offset * UNIT_SIZE - start
    with open(path, "rb") as file:
        file.seek(pos)
        phy, size, _tags = CQ_UNIT.unpack(file.read(UNIT_SIZE))
    return path, pos, phy, size


def segment_of(data_dir: Path, phy: int) -> tuple[Path, int]:
    """(segment file, position in it) of CommitLog offset ``phy``."""
    start = phy // SEGMENT_BYTES * SEGMENT_BYTES
    return StorePaths(data_dir).commitlog / offset_file_name(start), phy - start


def flip_byte(path: Path, pos: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, pos)
        os.pwrite(fd, bytes([byte[0] ^ 0x5A]), pos)
    finally:
        os.close(fd)


def value_byte(data_dir: Path, partition: int, offset: int) -> tuple[Path, int, int]:
    """(segment, position, phy of the entry) of a byte inside the value of the record at
    ``offset``: covered by the batch CRC, not by any header."""
    _queue_file, _pos, phy, _size = unit(data_dir, partition, offset)
    segment, pos = segment_of(data_dir, phy)
    return segment, pos + PREFIX_SIZE + RECORD_OVERHEAD + VALUE_BYTES // 2, phy
