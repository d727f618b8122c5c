"""The internal ``__transaction_state`` topic: where the transaction coordinator makes each
transactional id's state durable, in Kafka's record layouts (so Kafka's tools could read it):

  TransactionLogKey    v0  version int16 | transactional id string
  TransactionLogValue  v0  version int16 | producer id int64 | producer epoch int16 |
                           transaction timeout ms int32 | status int8 |
                           partitions [topic string | [partition int32]] |
                           last update ms int64 | start ms int64

A null value is a tombstone: the transactional id expired. A transactional id lives in
partition ``abs(java hashCode(id)) % transaction.state.log.num.partitions`` (Kafka's rule).
Writes go through the CommitLog like any batch and are answered once durable; at start the
topic is replayed, last record per id winning.
"""
from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from commitgate.engine import MessageStore, StoreStatus
from commitgate.gateway.groups.offsets_topic import TRANSACTION_STATE_TOPIC, java_hash
from commitgate.protocol.codec import DecodeError
from commitgate.protocol.record_batch import build_batch, decode_records

TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}
READ_CHUNK = 1 << 20
KEY_VERSION = 0
VALUE_VERSION = 0
_I16, _I32, _I64, _I8 = (struct.Struct(f">{c}") for c in "hiqb")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with the codes its log uses."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass
class TxnRecord:
    """One transactional id's durable state."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = 0
    start_ms: int = -1


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(record: TxnRecord) -> bytes:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(record.partitions):
        topics.setdefault(topic, []).append(partition)
    parts = [_VALUE_HEAD.pack(VALUE_VERSION, record.producer_id, record.producer_epoch,
                              record.timeout_ms, record.state), _I32.pack(len(topics))]
    for topic, partitions in topics.items():
        parts += [_string(topic), _I32.pack(len(partitions)),
                  b"".join(_I32.pack(p) for p in partitions)]
    parts.append(_I64.pack(record.last_update_ms) + _I64.pack(record.start_ms))
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: struct.Struct) -> int:
        if self.at + fmt.size > len(self.data):
            raise DecodeError("transaction log record cut short")
        (value,) = fmt.unpack_from(self.data, self.at)
        self.at += fmt.size
        return value

    def string(self) -> str:
        size = self.take(_I16)
        if size < 0 or self.at + size > len(self.data):
            raise DecodeError("bad string length in a transaction log record")
        text = self.data[self.at:self.at + size].decode()
        self.at += size
        return text


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of another kind (Kafka's later versions)."""
    reader = _Reader(data)
    return reader.string() if reader.take(_I16) == KEY_VERSION else None


def decode_value(data: bytes) -> TxnRecord:
    reader = _Reader(data)
    if reader.take(_I16) != VALUE_VERSION:
        raise DecodeError("unknown transaction log value version")
    record = TxnRecord(reader.take(_I64), reader.take(_I16), reader.take(_I32),
                       TxnState(reader.take(_I8)))
    for _ in range(reader.take(_I32)):
        topic = reader.string()
        record.partitions |= {(topic, reader.take(_I32)) for _ in range(reader.take(_I32))}
    record.last_update_ms, record.start_ms = reader.take(_I64), reader.take(_I64)
    return record


class TransactionLog:
    def __init__(self, store: MessageStore, partitions: int) -> None:
        self.store = store
        self.partitions = partitions

    def partition_for(self, transactional_id: str) -> int:
        return (java_hash(transactional_id) & 0x7FFFFFFF) % self.partitions

    def ensure(self) -> StoreStatus:
        """Create the topic on first use, as Kafka does."""
        if self.store.topic(TRANSACTION_STATE_TOPIC) is not None:
            return StoreStatus.OK
        return self.store.create_topic(TRANSACTION_STATE_TOPIC, self.partitions,
                                       TOPIC_CONFIGS).status

    async def write(self, transactional_id: str, record: TxnRecord | None) -> StoreStatus:
        """Append the id's new state (None: a tombstone); return once durable."""
        status = self.ensure()
        if status is not StoreStatus.OK:
            return status
        now = int(time.time() * 1000)
        value = None if record is None else encode_value(record)
        body = bytearray(build_batch([(encode_key(transactional_id), value, (), now)]))
        result = self.store.append(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id),
                                   memoryview(body), offset_count=1, max_timestamp=now)
        if result.status is not StoreStatus.OK:
            return result.status
        return await self.store.wait_durable(result.phy_end)

    def replay(self) -> Iterator[tuple[str, TxnRecord | None]]:
        """Every (transactional id, state) stored, in log order per partition."""
        if self.store.topic(TRANSACTION_STATE_TOPIC) is None:
            return
        for partition in range(self.store.topic(TRANSACTION_STATE_TOPIC).partitions):
            offset = self.store.log_start_offset(TRANSACTION_STATE_TOPIC, partition)
            end = self.store.log_end_offset(TRANSACTION_STATE_TOPIC, partition)
            while offset < end:
                read = self.store.read(TRANSACTION_STATE_TOPIC, partition, offset, READ_CHUNK)
                if read.status is not StoreStatus.OK or read.next_offset <= offset:
                    raise DecodeError(f"replaying {TRANSACTION_STATE_TOPIC}-{partition} stopped "
                                      f"at offset {offset}: {read.status}")
                for buffer in read.buffers:
                    for r in decode_records(buffer):
                        txn_id = decode_key(r.key) if r.key and r.offset >= offset else None
                        if txn_id is not None:
                            yield txn_id, None if r.value is None else decode_value(r.value)
                offset = read.next_offset
