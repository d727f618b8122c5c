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

KIP-848 groups (keys as above; values are "flexible": compact strings and arrays, a uvarint
length + 1 with 0 = null, uuids as 16 bytes, and an empty tagged-field section, one 0 byte,
closing every struct):

  ConsumerGroupMetadataKey                  v3  version int16 | group string
  ConsumerGroupMetadataValue                v0  version int16 | epoch int32
  ConsumerGroupMemberMetadataKey            v5  version int16 | group string | member string
  ConsumerGroupMemberMetadataValue          v0  version int16 | instance id? | rack id? |
                                                client id | client host | subscribed [string] |
                                                regex? | rebalance timeout int32 | assignor?
  ConsumerGroupTargetAssignmentMetadataKey  v6  version int16 | group string
  ConsumerGroupTargetAssignmentMetadataValue v0 version int16 | assignment epoch int32
  ConsumerGroupTargetAssignmentMemberKey    v7  version int16 | group string | member string
  ConsumerGroupTargetAssignmentMemberValue  v0  version int16 | [topic id uuid | [int32]]
  ConsumerGroupCurrentMemberAssignmentKey   v8  version int16 | group string | member string
  ConsumerGroupCurrentMemberAssignmentValue v0  version int16 | member epoch int32 |
                                                previous epoch int32 | state int8 |
                                                assigned [topic id uuid | [int32]] |
                                                pending revocation [topic id uuid | [int32]]

A null value is a tombstone: the offset, the member or the group was deleted.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from commitgate.gateway.groups.consumer_group import Assignment, ConsumerMember, MemberState
from commitgate.gateway.groups.group import Member
from commitgate.protocol.codec import DecodeError, read_uvarint, uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
CONSUMER_GROUP_KEY_VERSION = 3
MEMBER_KEY_VERSION = 5
TARGET_EPOCH_KEY_VERSION = 6
TARGET_MEMBER_KEY_VERSION = 7
CURRENT_ASSIGNMENT_KEY_VERSION = 8
MEMBER_KEY_KINDS = {MEMBER_KEY_VERSION: "member", TARGET_MEMBER_KEY_VERSION: "target",
                    CURRENT_ASSIGNMENT_KEY_VERSION: "current"}
# Kafka's MemberState codes in the current assignment record
MEMBER_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                      MemberState.UNRELEASED_PARTITIONS: 2}
I8 = struct.Struct(">b")
CONSUMER_GROUP_VALUE = 0
NO_TAGGED_FIELDS = b"\x00"
OFFSET_VALUE_EXPIRING = 1
OFFSET_VALUE = 3
GROUP_VALUE = 3


class RecordFormatError(ValueError):
    """A record of the offsets topic this broker cannot read."""


class Key(NamedTuple):
    kind: str  # "offset", "group" (classic); KIP-848: "consumer_group", "target_epoch",
    group: str  # and per member "member", "target", "current"
    topic: str | None = None  # the topic of an offset, the member of a member record
    partition: int = -1


@dataclass(slots=True)
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int = -1  # -1: the broker's offsets.retention.minutes applies
    # where the commit's record is in __consumer_offsets (not stored in the value): of a plain
    # and a transactional commit of one partition, the later record wins (Kafka's rule)
    record_offset: int = -1


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


def epoch_value(epoch: int) -> bytes:
    """A KIP-848 group's epoch, or its target assignment's epoch."""
    return I16.pack(CONSUMER_GROUP_VALUE) + I32.pack(epoch) + NO_TAGGED_FIELDS


def target_epoch_key(group: str) -> bytes:
    return I16.pack(TARGET_EPOCH_KEY_VERSION) + _string(group)


def member_key(version: int, group: str, member_id: str) -> bytes:
    """The key of a member's metadata, target or current assignment (a ``*_KEY_VERSION``)."""
    return I16.pack(version) + _string(group) + _string(member_id)


def _compact(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    data = text.encode()
    return uvarint(len(data) + 1) + data


def _array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _partitions(assignment: Assignment) -> bytes:
    return _array([topic.bytes + _array([I32.pack(p) for p in sorted(parts)]) +
                   NO_TAGGED_FIELDS for topic, parts in sorted(assignment.items()) if parts])


def member_value(member: ConsumerMember) -> bytes:
    return (I16.pack(CONSUMER_GROUP_VALUE) + _compact(member.instance_id) +
            _compact(member.rack_id) + _compact(member.client_id) +
            _compact(member.client_host) + _array([_compact(t) for t in member.subscribed]) +
            _compact(member.regex) + I32.pack(member.rebalance_timeout_ms) +
            _compact(member.server_assignor) + NO_TAGGED_FIELDS)


def target_value(assignment: Assignment) -> bytes:
    return I16.pack(CONSUMER_GROUP_VALUE) + _partitions(assignment) + NO_TAGGED_FIELDS


def current_value(member: ConsumerMember) -> bytes:
    return (I16.pack(CONSUMER_GROUP_VALUE) + I32.pack(member.epoch) +
            I32.pack(member.previous_epoch) + I8.pack(MEMBER_STATE_CODES[member.state]) +
            _partitions(member.assigned) + _partitions(member.pending_revocation) +
            NO_TAGGED_FIELDS)


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

    def i8(self) -> int:
        return self._fixed(I8)

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

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(memoryview(self.data), self.pos)
        except DecodeError as exc:
            raise RecordFormatError(str(exc)) from None
        return value

    def compact(self) -> str | None:
        size = self.uvarint()
        return None if size == 0 else self._take(size - 1).decode()

    def count(self) -> int:
        """A compact array's length, bounded by the bytes left (each item takes some)."""
        count = self.uvarint() - 1
        if not 0 <= count <= len(self.data) - self.pos:
            raise RecordFormatError(f"bad array length {count}")
        return count

    def tags(self) -> None:
        """Skip a tagged-field section (fields of later versions this broker does not use)."""
        count = self.uvarint()
        if count > len(self.data) - self.pos:
            raise RecordFormatError(f"bad tagged field count {count}")
        for _ in range(count):
            self.uvarint()
            self._take(self.uvarint())

    def assignment(self) -> Assignment:
        assignment: Assignment = {}
        for _ in range(self.count()):
            topic = uuid.UUID(bytes=self._take(16))
            assignment[topic] = {self.i32() for _ in range(self.count())}
            self.tags()
        return assignment


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
    if version == TARGET_EPOCH_KEY_VERSION:
        return Key("target_epoch", group)
    if version in MEMBER_KEY_KINDS:
        return Key(MEMBER_KEY_KINDS[version], group, reader.string() or "")
    raise RecordFormatError(f"unknown key version {version}")


def _flexible(data: bytes) -> _Reader:
    reader = _Reader(data)
    if (version := reader.i16()) != CONSUMER_GROUP_VALUE:
        raise RecordFormatError(f"unknown consumer group record value version {version}")
    return reader


def read_epoch_value(data: bytes) -> int:
    """The group epoch or the target assignment epoch of a KIP-848 group."""
    return _flexible(data).i32()


def read_member_value(member_id: str, data: bytes) -> ConsumerMember:
    reader = _flexible(data)
    instance_id, rack_id = reader.compact(), reader.compact()
    client_id, client_host = reader.compact() or "", reader.compact() or ""
    subscribed = tuple(reader.compact() or "" for _ in range(reader.count()))
    regex = reader.compact()
    return ConsumerMember(member_id, instance_id, rack_id, client_id, client_host,
                          rebalance_timeout_ms=reader.i32(), subscribed=subscribed, regex=regex,
                          server_assignor=reader.compact())


def read_target_value(data: bytes) -> Assignment:
    return _flexible(data).assignment()


def read_current_value(data: bytes) -> CurrentAssignment:
    reader = _flexible(data)
    epoch, previous, code = reader.i32(), reader.i32(), reader.i8()
    states = {c: s for s, c in MEMBER_STATE_CODES.items()}
    if code not in states:
        raise RecordFormatError(f"unknown member state {code}")
    return CurrentAssignment(epoch, previous, states[code], reader.assignment(),
                             reader.assignment())


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
