"""The schemas of protocol/schemas/ (messages kafka-python lacks: KIP-848's ConsumerGroupHeartbeat
and ConsumerGroupDescribe) against hand-built bytes, one message per version, so the layout is
checked by something other than our own round trip."""
from __future__ import annotations

import struct
import uuid

from commitgate.protocol import messages

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")
NO_TAGS = b"\x00"


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def text(value: str | None) -> bytes:
    """A compact (nullable) string: length + 1 as a varint (0 = null), then UTF-8."""
    if value is None:
        return b"\x00"
    data = value.encode()
    return bytes([len(data) + 1]) + data


def array(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def check(name: str, version: int, message: object, wire: bytes) -> None:
    codec = messages.get(name)
    assert bytes(codec.encode(message, version)) == wire
    decoded, end = codec.decode(memoryview(wire), version)
    assert end == len(wire) and decoded == message


def test_consumer_group_heartbeat_request_v0():
    R = messages.get("ConsumerGroupHeartbeatRequest").cls
    message = R(group_id="g", member_id="m1", member_epoch=3, instance_id=None, rack_id="r",
                rebalance_timeout_ms=300_000, subscribed_topic_names=["t"],
                server_assignor="range",
                topic_partitions=[R.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])])
    wire = (text("g") + text("m1") + i32(3) + text(None) + text("r") + i32(300_000) +
            array([text("t")]) + text("range") +
            array([TOPIC.bytes + array([i32(0), i32(2)]) + NO_TAGS]) + NO_TAGS)
    check("ConsumerGroupHeartbeatRequest", 0, message, wire)
    # the fields a member leaves out when unchanged are nulls: -1 and 0-length prefixes
    bare = R(group_id="g", member_id="m1", member_epoch=3)
    check("ConsumerGroupHeartbeatRequest", 0, bare,
          text("g") + text("m1") + i32(3) + text(None) + text(None) + i32(-1) + b"\x00" +
          text(None) + b"\x00" + NO_TAGS)


def test_consumer_group_heartbeat_response_v0():
    R = messages.get("ConsumerGroupHeartbeatResponse").cls
    assignment = R.Assignment(topic_partitions=[
        R.TopicPartitions(topic_id=TOPIC, partitions=[1])])
    message = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m1",
                member_epoch=4, heartbeat_interval_ms=5000, assignment=assignment)
    wire = (i32(0) + b"\x00\x00" + text(None) + text("m1") + i32(4) + i32(5000) +
            b"\x01" + array([TOPIC.bytes + array([i32(1)]) + NO_TAGS]) + NO_TAGS + NO_TAGS)
    check("ConsumerGroupHeartbeatResponse", 0, message, wire)
    # a null struct is one byte, -1
    fenced = R(throttle_time_ms=0, error_code=110, error_message="x", member_id=None,
               member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    check("ConsumerGroupHeartbeatResponse", 0, fenced,
          i32(0) + struct.pack(">h", 110) + text("x") + text(None) + i32(-1) + i32(0) +
          b"\xff" + NO_TAGS)


def test_consumer_group_describe_request_v0():
    R = messages.get("ConsumerGroupDescribeRequest").cls
    check("ConsumerGroupDescribeRequest", 0,
          R(group_ids=["a", "b"], include_authorized_operations=True),
          array([text("a"), text("b")]) + b"\x01" + NO_TAGS)


def test_consumer_group_describe_response_v0():
    R = messages.get("ConsumerGroupDescribeResponse").cls
    D = R.DescribedGroup
    owned = R.Assignment(topic_partitions=[
        R.TopicPartitions(topic_id=TOPIC, topic_name="t", partitions=[0])])
    member = R.Member(member_id="m1", instance_id=None, rack_id=None, member_epoch=2,
                      client_id="c", client_host="/h", subscribed_topic_names=["t"],
                      subscribed_topic_regex=None, assignment=owned, target_assignment=owned)
    message = R(throttle_time_ms=0, groups=[D(
        error_code=0, error_message=None, group_id="g", group_state="Stable", group_epoch=2,
        assignment_epoch=2, assignor_name="uniform", members=[member],
        authorized_operations=-2**31)])
    assigned = array([TOPIC.bytes + text("t") + array([i32(0)]) + NO_TAGS]) + NO_TAGS
    wire = (i32(0) + array([
        b"\x00\x00" + text(None) + text("g") + text("Stable") + i32(2) + i32(2) +
        text("uniform") +
        array([text("m1") + text(None) + text(None) + i32(2) + text("c") + text("/h") +
               array([text("t")]) + text(None) + assigned + assigned + NO_TAGS]) +
        i32(-2**31) + NO_TAGS]) + NO_TAGS)
    check("ConsumerGroupDescribeResponse", 0, message, wire)


def test_consumer_group_heartbeat_request_v1_adds_the_regex_after_the_names():
    R = messages.get("ConsumerGroupHeartbeatRequest").cls
    message = R(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=1000,
                subscribed_topic_names=[], subscribed_topic_regex="^t-.*", topic_partitions=[])
    check("ConsumerGroupHeartbeatRequest", 1, message,
          text("g") + text("m1") + i32(0) + text(None) + text(None) + i32(1000) + array([]) +
          text("^t-.*") + text(None) + array([]) + NO_TAGS)


def test_consumer_group_describe_response_v1_adds_the_member_type():
    R = messages.get("ConsumerGroupDescribeResponse").cls
    empty = R.Assignment(topic_partitions=[])
    member = R.Member(member_id="m1", instance_id=None, rack_id=None, member_epoch=2,
                      client_id="c", client_host="/h", subscribed_topic_names=[],
                      subscribed_topic_regex="t.*", assignment=empty, target_assignment=empty,
                      member_type=1)
    message = R(throttle_time_ms=0, groups=[R.DescribedGroup(
        error_code=0, error_message=None, group_id="g", group_state="Stable", group_epoch=2,
        assignment_epoch=2, assignor_name="uniform", members=[member],
        authorized_operations=-2**31)])
    wire = (i32(0) + array([
        b"\x00\x00" + text(None) + text("g") + text("Stable") + i32(2) + i32(2) +
        text("uniform") +
        array([text("m1") + text(None) + text(None) + i32(2) + text("c") + text("/h") +
               array([]) + text("t.*") + array([]) + NO_TAGS + array([]) + NO_TAGS +
               b"\x01" + NO_TAGS]) +
        i32(-2**31) + NO_TAGS]) + NO_TAGS)
    check("ConsumerGroupDescribeResponse", 1, message, wire)
