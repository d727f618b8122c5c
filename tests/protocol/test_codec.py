"""The schema-compiled codecs against an independent implementation (kafka-python 3's
schema-driven classes) for every message and version both know, plus round trips and
malformed-input handling."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import struct
import uuid

import kafka.protocol
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from commitgate.protocol import messages, schema
from commitgate.protocol.codec import DecodeError, versions_of
from commitgate.protocol.schema import FieldSpec

INT_RANGES = {"int8": 7, "int16": 15, "uint16": None, "int32": 31, "int64": 63}


def _kafka_python_classes() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        module = importlib.import_module(info.name)
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, ApiMessage) and cls is not ApiMessage:
                found[name] = cls
    return found


KAFKA_PYTHON = _kafka_python_classes()
CASES = [(name + kind, v) for name in sorted(schema.api_names().values())
         for kind in ("Request", "Response")
         for v in versions_of(schema.load(name + kind))]


def _scalar(spec: FieldSpec, version: int) -> st.SearchStrategy:
    kind, nullable = spec.element, version in spec.nullable and not spec.is_array
    if kind in INT_RANGES:
        bits = INT_RANGES[kind]
        base = st.integers(0, 65535) if bits is None else st.integers(-(2**bits), 2**bits - 1)
    elif kind == "uint32":
        base = st.integers(0, 2**32 - 1)
    elif kind == "float64":
        base = st.floats(allow_nan=False)
    elif kind == "bool":
        base = st.booleans()
    elif kind == "string":
        base = st.text(max_size=12)
    elif kind in ("bytes", "records"):
        base = st.binary(max_size=40)
    elif kind == "uuid":
        base = st.uuids()
    else:
        raise AssertionError(kind)
    return st.one_of(st.none(), base) if nullable else base


def _struct(cls: type, fields: list[FieldSpec], version: int, depth: int) -> st.SearchStrategy:
    parts = {}
    for spec in fields:
        if version not in spec.versions:
            continue
        element = (_struct(cls.struct_classes[spec.element] if hasattr(cls, "struct_classes")
                           else None, spec.fields, version, depth + 1)
                   if spec.is_struct else _scalar(spec, version))
        if spec.is_struct and version in spec.nullable and not spec.is_array:
            element = st.one_of(st.none(), element)
        if spec.is_array:
            element = st.lists(element, max_size=0 if depth > 2 else 3)
            if version in spec.nullable:
                element = st.one_of(st.none(), element)
        parts[spec.name] = element
    return st.fixed_dictionaries(parts)


def _build(codec, data: dict, fields: list[FieldSpec], name: str):
    cls = codec.cls.struct_classes[name]
    values = {}
    for spec in fields:
        if spec.name not in data:
            continue
        value = data[spec.name]
        if spec.is_struct and value is not None:
            if spec.is_array:
                value = [_build(codec, v, spec.fields, spec.element) for v in value]
            else:
                value = _build(codec, value, spec.fields, spec.element)
        values[spec.name] = value
    return cls(**values)


def _strategy(name: str, version: int) -> st.SearchStrategy:
    codec = messages.get(name)
    return _struct(codec.cls, codec.spec.fields, version, 0).map(
        lambda data: _build(codec, data, codec.spec.fields, name))


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_encoding_matches_kafka_python_and_round_trips(name, version, data):
    codec = messages.get(name)
    message = data.draw(_strategy(name, version))
    encoded = codec.encode(message, version)
    decoded, end = codec.decode(memoryview(encoded), version)
    assert end == len(encoded)
    assert codec.encode(decoded, version) == encoded
    theirs = KAFKA_PYTHON.get(name)
    if theirs is None:
        return
    if name == "ApiVersionsResponse" and message.error_code:
        return  # kafka-python reads an ApiVersions error as v0, as brokers answer errors in v0
    their_message = theirs.decode(encoded, version=version)
    their_message._header = None  # a decoded kafka-python message lacks it; encode needs it
    assert their_message.encode(version=version) == encoded


def test_records_stay_memoryviews_of_the_request():
    codec = messages.get("ProduceRequest")
    req = codec.cls(acks=1, timeout_ms=1, topic_data=[codec.cls.TopicProduceData(
        name="t", partition_data=[codec.cls.PartitionProduceData(index=0, records=b"x" * 64)])])
    buf = bytearray(codec.encode(req, 9))
    decoded, _ = codec.decode(memoryview(buf), 9)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"x" * 64
    records[0] = ord("y")  # a view into the request buffer, not a copy
    assert b"yxxx" in buf


def test_fetch_records_are_encoded_as_separate_buffers():
    from commitgate.protocol.codec import Chunks

    codec = messages.get("FetchResponse")
    r = codec.cls
    big = memoryview(bytes(range(256)) * 8)
    resp = r(responses=[r.FetchableTopicResponse(topic="t", partitions=[r.PartitionData(
        partition_index=0, records=[big, big])])])
    chunks = Chunks()
    last = codec.encode_into(resp, 12, chunks, bytearray())
    assert any(part is big for part in chunks.parts)
    joined = b"".join([*chunks.parts, last])
    assert joined == codec.encode(resp, 12)


@pytest.mark.parametrize("cut", [1, 5, 9, 20, 40])
def test_truncated_requests_raise_decode_error(cut):
    codec = messages.get("ProduceRequest")
    req = codec.cls(acks=1, timeout_ms=1, topic_data=[codec.cls.TopicProduceData(
        name="topic", partition_data=[codec.cls.PartitionProduceData(index=0, records=b"z" * 30)])])
    encoded = codec.encode(req, 9)
    with pytest.raises(DecodeError):
        codec.decode(memoryview(encoded[:cut]), 9)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_never_raises_anything_but_decode_error(blob):
    for name, version in (("ProduceRequest", 9), ("FetchRequest", 12), ("MetadataRequest", 12),
                          ("CreateTopicsRequest", 5), ("ApiVersionsRequest", 3)):
        try:
            messages.get(name).decode(memoryview(blob), version)
        except DecodeError:
            pass


def test_unknown_version_is_a_decode_error():
    with pytest.raises(DecodeError):
        messages.get("ProduceRequest").decode(memoryview(b""), 99)


def test_uuid_default_is_zero():
    codec = messages.get("MetadataResponse")
    encoded = codec.encode(codec.cls(topics=[codec.cls.MetadataResponseTopic(name="x")]), 12)
    decoded, _ = codec.decode(memoryview(encoded), 12)
    assert decoded.topics[0].topic_id == uuid.UUID(int=0)


def test_error_message_longer_than_an_int16_string_is_cut_not_an_encode_failure():
    codec = messages.get("AlterConfigsResponse")
    resource = codec.cls.AlterConfigsResourceResponse(error_code=40, resource_name="t",
                                                      error_message="é" * 20_000)
    decoded, _ = codec.decode(memoryview(codec.encode(codec.cls(responses=[resource]), 1)), 1)
    message = decoded.responses[0].error_message
    assert len(message.encode()) == 0x7FFF and message == "é" * 16_382 + "..."
    flexible, _ = codec.decode(memoryview(codec.encode(codec.cls(responses=[resource]), 2)), 2)
    assert flexible.responses[0].error_message == "é" * 20_000  # compact strings: no limit
    resource.resource_name = "y" * 40_000  # other strings still fail loudly
    with pytest.raises(struct.error):
        codec.encode(codec.cls(responses=[resource]), 1)
