"""Record keys and values of the ``__consumer_offsets`` topic, in Kafka's own layouts, so that
Kafka's tools could read the topic (strings: int16 length, -1 = null; bytes: int32 length):

  OffsetCommitKey     v1  version int16 | group string | topic string | partition int32
  GroupMetadataKey    v2  version int16 | group string
  OffsetCommitValue   v1  version int16 | offset int64 | metadata string | commit time int64 |
                          expire time int64                 (when the commit set a retention)
                      v3  version int16 | offset int64 | leader epoch int32 | metadata string |
                          commit time int64
  GroupMetadataValue  v3  version int16 | protocol type string | generation int32 |
                          protocol string? | leader string? | state time int64 |
                          members [member id string | instance id string? | client id string |
                                   client host string | rebalance timeout int32 |
                                   session timeout int32 | subscription bytes | assignment bytes]
  ConsumerGroupMetadataKey    v3  version int16 | group string
  ConsumerGroupMetadataValue  v0  version int16 | epoch int32 | no tagged fields (one 0 byte)

(A KIP-848 group keeps only its epoch here: its members are not stored and rejoin after a
restart, see docs/architecture.md.) A null value is a tombstone: the offset or the group was deleted.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from gateway.groups.group import Member

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
CONSUMER_GROUP_KEY_VERSION = 3
CONSUMER_GROUP_VALUE = 0
NO_TAGGED_FIELDS = b"\x00"
OFFSET_VALUE_EXPIRING = 1
OFFSET_VALUE = 3
GROUP_VALUE = 3


class RecordFormatError(ValueError):
    """A record of the offsets topic this broker cannot read."""


class Key(NamedTuple):
    kind: str  # "offset", "group" (classic) or "consumer_group" (KIP-848)
    group: str
    topic: str | None = None
    partition: int = -1


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int = -1  # -1: the broker's offsets.retention.minutes applies


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_ms: int
    members: list[Member]  # each with the one protocol chosen, and its assignment


# ---- writing -------------------------------------------------------------------------------

def _string(text: str | None) -> bytes:
    if text is None:
        return I16.pack(-1)
    data = text.encode()
    return I16.pack(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return I32.pack(len(data)) + data


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return I16.pack(OFFSET_KEY_VERSION) + _string(group) + _string(topic) + I32.pack(partition)


def group_key(group: str) -> bytes:
    return I16.pack(GROUP_KEY_VERSION) + _string(group)


def consumer_group_key(group: str) -> bytes:
    return I16.pack(CONSUMER_GROUP_KEY_VERSION) + _string(group)


def consumer_group_value(epoch: int) -> bytes:
    return I16.pack(CONSUMER_GROUP_VALUE) + I32.pack(epoch) + NO_TAGGED_FIELDS


def offset_value(value: OffsetValue) -> bytes:
    if value.expire_ms >= 0:
        return (I16.pack(OFFSET_VALUE_EXPIRING) + I64.pack(value.offset) +
                _string(value.metadata) + I64.pack(value.commit_ms) + I64.pack(value.expire_ms))
    return (I16.pack(OFFSET_VALUE) + I64.pack(value.offset) + I32.pack(value.leader_epoch) +
            _string(value.metadata) + I64.pack(value.commit_ms))


def _member(m: Member, protocol: str) -> bytes:
    return (_string(m.member_id) + _string(m.instance_id) + _string(m.client_id) +
            _string(m.client_host) + I32.pack(m.rebalance_timeout_ms) +
            I32.pack(m.session_timeout_ms) + _bytes(m.metadata(protocol)) + _bytes(m.assignment))


def group_value(value: GroupValue) -> bytes:
    return (I16.pack(GROUP_VALUE) + _string(value.protocol_type) + I32.pack(value.generation) +
            _string(value.protocol) + _string(value.leader) + I64.pack(value.state_ms) +
            I32.pack(len(value.members)) +
            b"".join(_member(m, value.protocol or "") for m in value.members))


# ---- reading -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("record ends early")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return value

    def i16(self) -> int:
        return self._fixed(I16)

    def i32(self) -> int:
        return self._fixed(I32)

    def i64(self) -> int:
        return self._fixed(I64)

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise RecordFormatError("record ends early")
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def string(self) -> str | None:
        size = self.i16()
        return None if size == -1 else self._take(size).decode()

    def bytes_(self) -> bytes:
        return self._take(self.i32())


def read_key(data: bytes) -> Key:
    reader = _Reader(data)
    version = reader.i16()
    group = reader.string() or ""
    if version in (0, OFFSET_KEY_VERSION):
        return Key("offset", group, reader.string() or "", reader.i32())
    if version == GROUP_KEY_VERSION:
        return Key("group", group)
    if version == CONSUMER_GROUP_KEY_VERSION:
        return Key("consumer_group", group)
    raise RecordFormatError(f"unknown key version {version}")


def read_consumer_group_value(data: bytes) -> int:
    """The epoch of a KIP-848 group."""
    reader = _Reader(data)
    if (version := reader.i16()) != CONSUMER_GROUP_VALUE:
        raise RecordFormatError(f"unknown consumer group metadata version {version}")
    return reader.i32()


def read_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.i16()
    offset = reader.i64()
    epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string() or ""
    commit_ms = reader.i64()
    expire_ms = reader.i64() if version == OFFSET_VALUE_EXPIRING else -1
    return OffsetValue(offset, epoch, metadata, commit_ms, expire_ms)


def read_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
    if (version := reader.i16()) != GROUP_VALUE:
        raise RecordFormatError(f"unknown group metadata version {version}")
    protocol_type, generation = reader.string() or "", reader.i32()
    protocol, leader, state_ms = reader.string(), reader.string(), reader.i64()
    members = [Member(reader.string() or "", reader.string(), reader.string() or "",
                      reader.string() or "", reader.i32(), reader.i32(), protocol_type,
                      [(protocol or "", reader.bytes_())], reader.bytes_())
               for _ in range(_count(reader))]
    return GroupValue(protocol_type, generation, protocol, leader, state_ms, members)


def _count(reader: _Reader) -> int:
    count = reader.i32()
    if not 0 <= count <= len(reader.data):  # each member takes bytes: bounds a bad count
        raise RecordFormatError(f"bad member count {count}")
    return count
