"""A fuzzer for any Kafka-compatible broker, driven by Kafka's own message schemas.

Every case is built from ``(seed, case number)`` alone, so a finding is replayed by running the
same seed from its case number. A case is one of:

- ``valid``: a request of an API the broker advertises, at a version inside or outside the
  advertised range, with random field values from the schema (edge numbers, empty and 32 KiB
  strings, empty and long arrays, null arrays where the schema forbids null, random record sets:
  well-formed batches, batches with lying headers resealed with a good CRC, garbage);
- ``mutated``: such a request with its encoded bytes damaged (bit flips, truncation, extension,
  lying length prefixes and varints, a random api key or version, garbage tagged fields), sent
  in a frame whose size prefix is right;
- ``frame``: a frame whose size prefix lies (longer, shorter, negative, a header alone); the
  fuzzer half-closes the socket after it, so the broker sees the end of the stream.

A framed case is followed on the same connection by an ApiVersions probe: the responses before the
probe's are the case's (none for a Produce with acks=0). Outcomes per case: answered, no response,
closed (a legitimate answer to an undecodable frame), timed out. Findings: the broker stops
answering ApiVersions and Metadata on a new connection after a batch (crash, hang), a response
that does not decode or carries another correlation id, UNKNOWN_SERVER_ERROR or an error text
with Python internals in it, a schema-valid request at an advertised version answered by
closing the connection, and (given the broker's log) new tracebacks. A batch ends early once
every connection has timed out in a row; the run stops at the first crash or hang.

Kept from damaging the broker in legitimate ways: topic and group names come from small pools
(plus fixed edge names and junk no broker accepts as a topic name), so the topics created stay
few; partition counts stay under 9, requests under ~100 KiB, wait times under 300 ms;
internal topics are never named to DeleteTopics, DeleteRecords or CreatePartitions; config
names are topic configs or junk, never a dynamic broker config.
"""
from __future__ import annotations

import asyncio
import random
import re
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from commitgate.protocol import messages, schema
from commitgate.protocol.codec import DecodeError, MessageCodec, uvarint
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import CODECS, build_batch

API_VERSIONS = 18
METADATA = 3
PROBE_CORRELATION = 0x5EED_F022
CLIENT_ID = b"commitgate-fuzz"
# what a Python exception's text looks like, as opposed to a message written for a client
PYTHON_TEXT = re.compile(r"Traceback|unpack_from|NoneType|object has no attribute|"
                         r"(Key|Index|Type|Attribute|Value|Struct)Error|"
                         r"buffer of|not subscriptable|invalid literal")
GZIP_MAGIC = b"\x1f\x8b"
MAX_RESPONSE_BYTES = 64 << 20  # a larger answer to one fuzz case is itself a finding

TOPICS = tuple(f"fuzz-{i}" for i in range(6))
INTERNAL_TOPIC = "__consumer_offsets"
EDGE_TOPICS = ("", ".", "..", "x" * 249, "x" * 250, "fuzz/0", "тема", INTERNAL_TOPIC,
               "fuzz\x00", "__transaction_state")
# Kafka 4 advertises Produce from v0 for librdkafka but refuses v0-v2 (KAFKA-18659)
REFUSED_THOUGH_ADVERTISED = {0: 3}
# Kafka's parser refuses an ACL request holding an UNKNOWN (0) code by closing the connection
CLOSED_ON_PARSE = frozenset({29, 30, 31})  # DescribeAcls, CreateAcls, DeleteAcls
DESTRUCTIVE_APIS = frozenset({20, 21, 37})  # DeleteTopics, DeleteRecords, CreatePartitions
GROUPS = ("fuzz-group-0", "fuzz-group-1", "")
TOPIC_CONFIGS = ("retention.ms", "cleanup.policy", "max.message.bytes", "compression.type",
                 "min.insync.replicas", "retention.bytes", "message.timestamp.type",
                 "segment.ms", "fuzz.unknown")
_TOPIC_FIELDS = frozenset({"topic", "topic_names", "subscribed_topic_names", "resource_name"})
_GROUP_FIELDS = frozenset({"group_id", "groups", "group_ids", "groups_names", "key",
                           "coordinator_keys"})
# values that get a request past its first check to the handler's deeper paths (most of the
# time; the other times the field gets an edge value like any other)
_PARTITIONS = (0, 0, 0, 1, -1, 7)
_PLAUSIBLE = {
    "acks": (-1, 0, 1), "resource_type": (2, 4), "key_type": (0, 1), "isolation_level": (0, 1),
    "config_operation": (0, 1, 2, 3), "session_timeout_ms": (6_000, 10_000, 45_000),
    "generation_id": (-1, 0, 1), "member_epoch": (0, -1, 1), "session_id": (0,),
    "session_epoch": (-1, 0), "replica_id": (-1,), "producer_id": (-1, 0, 1),
    "producer_epoch": (-1, 0), "fetch_offset": (0, 1, 10), "offset": (-1, 0, 1, 10),
    "timestamp": (-1, -2, -3, 0, 1_700_000_000_000), "partition_index": _PARTITIONS,
    "partition": _PARTITIONS, "index": _PARTITIONS, "partition_indexes": _PARTITIONS,
    "partitions": _PARTITIONS,
}
_SMALL_COUNTS = frozenset({"num_partitions", "count", "replication_factor"})
_INT_RANGE = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16, "uint32": 32}


# ---- cases ---------------------------------------------------------------------------------------

@dataclass
class Case:
    number: int
    api_key: int
    version: int  # as the header says; may lie outside what the broker advertises
    kind: str  # valid, mutated:<how>, frame:<how>
    data: bytes  # everything sent, size prefix included
    framed: bool  # exactly one frame with a true size prefix: a probe can follow
    checked: bool  # schema-valid at an advertised version: closing on it is a finding


class _Values:
    """Random field values of one request, from its schema."""

    def __init__(self, rng: random.Random, codec: MessageCodec, version: int,
                 api_key: int) -> None:
        self.rng = rng
        self.codec = codec
        self.version = version
        self.destructive = api_key in DESTRUCTIVE_APIS
        self.budget = 1_500  # values per case: bounds the size of a request
        self.room = 96 << 10  # bytes for long strings, bytes and record sets per case
        self.schema_valid = True
        self.strings: list[bytes] = []  # encoded non-empty strings, for lying prefixes

    def message(self) -> object:
        return self.struct(self.codec.spec.name, self.codec.spec.fields)

    def struct(self, name: str, fields: list[schema.FieldSpec]) -> object:
        obj = self.codec.cls.struct_classes[name]()
        for spec in fields:
            if self.version in spec.versions:
                setattr(obj, spec.name, self.field(spec, name))
        return obj

    def field(self, spec: schema.FieldSpec, owner: str) -> object:
        if not spec.is_array:
            return self.element(spec, owner)
        if self.rng.random() < 0.03:
            self.schema_valid &= self.version in spec.nullable
            return None
        return [self.element(spec, owner) for _ in range(self.count(spec))]

    def count(self, spec: schema.FieldSpec) -> int:
        roll = self.rng.random()
        if roll < 0.2 or self.budget <= 0:
            return 0
        if roll < 0.9:
            n = self.rng.randint(1, 3)
        elif roll < 0.97:
            n = self.rng.randint(4, 50)
        else:
            n = self.rng.randint(50, 200 if spec.is_struct else 2_000)
        n = min(n, self.budget)
        self.budget -= n
        return n

    def element(self, spec: schema.FieldSpec, owner: str) -> object:
        nullable = self.version in spec.nullable and not spec.is_array
        kind = spec.element
        if spec.is_struct:
            if nullable and self.rng.random() < 0.1:
                return None
            return self.struct(kind, spec.fields)
        if nullable and kind in ("string", "bytes", "records") and self.rng.random() < 0.05:
            return None
        if kind == "bool":
            return self.rng.random() < 0.5
        if kind in _INT_RANGE:
            return self.integer(spec.name, kind)
        if kind == "float64":
            return self.rng.choice((0.0, -1.0, 1e308, float("nan"), self.rng.random()))
        if kind == "string":
            return self.string(spec.name, owner)
        if kind == "bytes":
            return self.rng.randbytes(self.take(self.rng.choice((0, 1, 16,
                                                                 self.rng.randint(0, 1_000)))))
        if kind == "records":
            records = record_set(self.rng) if self.room > 0 else None
            self.room -= len(records or b"")
            return records
        return uuid.UUID(int=self.rng.choice((0, 1, self.rng.getrandbits(128))))

    def integer(self, name: str, kind: str) -> int:
        rng = self.rng
        plausible = _PLAUSIBLE.get(name)
        if plausible is not None and rng.random() < 0.8:
            return rng.choice(plausible)
        if name.endswith("_ms") or "timeout" in name:  # bounded waits keep cases short
            return rng.choice((-1, 0, 1, 100, rng.randint(0, 300)))
        if name in _SMALL_COUNTS:  # no legitimate filling of the disk with partitions
            return rng.choice((-2, -1, 0, 1, 2, 3, 8))
        bits = _INT_RANGE[kind]
        low, high = (0, (1 << bits) - 1) if kind.startswith("u") else \
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return rng.choice((0, 1, -1 if low else 2, low, high, low + 1, high - 1,
                           rng.randint(0, 100), rng.randint(low, high)))

    def string(self, name: str, owner: str) -> str:
        rng = self.rng
        config = "Config" in owner
        if name in _TOPIC_FIELDS or name == "name" and "Topic" in owner and not config:
            text = self.topic()
        elif name in _GROUP_FIELDS:
            text = rng.choice(GROUPS)
        elif name == "name" and config or name == "configuration_keys":
            text = rng.choice(TOPIC_CONFIGS) if rng.random() < 0.8 else self.text()
        else:
            text = self.text()
        encoded = text.encode()
        if encoded:
            self.strings.append(encoded)
        return text

    def topic(self) -> str:
        roll = self.rng.random()
        if roll < 0.75:
            return self.rng.choice(TOPICS)
        if roll < 0.9:
            name = self.rng.choice(EDGE_TOPICS)
            return self.rng.choice(TOPICS) if self.destructive and name.startswith("__") \
                else name
        return "!" + self.text()[:249]  # never a valid topic name: nothing gets created

    def text(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            return ""
        if roll < 0.8:
            return "".join(rng.choices("abcdefghij-._0123456789", k=rng.randint(1, 24)))
        if roll < 0.95:
            return "".join(chr(rng.choice((rng.randint(1, 0x7F), rng.randint(0x80, 0xD7FF))))
                           for _ in range(rng.randint(1, 40)))
        return "y" * self.take(rng.choice((255, 256, 1_000, 32_767)))  # the int16 limit

    def take(self, size: int) -> int:
        """``size`` if the case has room left for it, else 0."""
        if size > self.room:
            return 0
        self.room -= size
        return size


def _batch(rng: random.Random, compression: str) -> bytes:
    records = []
    for delta in range(rng.randint(1, 10)):
        key = None if rng.random() < 0.5 else rng.randbytes(rng.randint(0, 64))
        size = rng.choice((0, 10, rng.randint(0, 1_000)))
        value = None if rng.random() < 0.05 else rng.randbytes(size)
        headers = [(f"h{i}", rng.randbytes(rng.randint(0, 8))) for i in range(rng.randint(0, 2))]
        timestamp = rng.choice((0, -1, 1_700_000_000_000 + delta, 2**63 - 1))
        records.append((key, value, headers, timestamp))
    idempotent = rng.random() < 0.2
    batch = bytearray(build_batch(records, compression=compression,
                                  producer_id=rng.randint(0, 1_000) if idempotent else -1,
                                  producer_epoch=rng.randint(0, 3) if idempotent else -1,
                                  base_sequence=rng.randint(0, 100) if idempotent else -1,
                                  transactional=rng.random() < 0.05))
    if batch[61:63] == GZIP_MAGIC:  # gzip writes the time in its header: same seed, same bytes
        batch[65:69] = bytes(4)
        _reseal(batch)
    return batch


def _reseal(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


_BATCH_LIES = (  # (offset, struct format, values): header fields a broker must not trust
    (8, ">i", (0, 1, -1, 2**31 - 1, 49)),  # batchLength
    (16, ">b", (0, 1, 3, -1)),  # magic
    (21, ">h", (5, 6, 7, 0x20, 0x30, -1)),  # attributes: unknown codecs, control
    (23, ">i", (-1, 2**31 - 1, 1_000)),  # lastOffsetDelta
    (57, ">i", (0, -1, 2**31 - 1, 1_000_000)),  # recordCount
)


def record_set(rng: random.Random) -> bytes | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return b""
    if roll < 0.2:
        return rng.randbytes(rng.randint(1, 300))
    batch = _batch(rng, rng.choice(sorted(CODECS)))
    if roll < 0.55:
        return bytes(batch) * rng.choice((1, 1, 1, 2))
    if roll < 0.65:
        offset, fmt, values = rng.choice(_BATCH_LIES)
        struct.pack_into(fmt, batch, offset, rng.choice(values))
    elif roll < 0.8:  # a record count that agrees with lastOffsetDelta, and with nothing else
        count = rng.choice((2**31 - 1, 1_000_000, 1_000, 0))
        struct.pack_into(">i", batch, 23, count - 1)
        struct.pack_into(">i", batch, 57, count)
    else:  # damaged records under a good CRC: only record-level validation catches it
        for _ in range(rng.randint(1, 4)):
            batch[rng.randrange(61, len(batch))] = rng.randrange(256)
    if rng.random() < 0.8:
        _reseal(batch)
    return bytes(batch)


# ---- mutations -----------------------------------------------------------------------------------

def _flip(rng: random.Random, body: bytearray, _: _Values) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(body))
        body[i] ^= 1 << rng.randrange(8)


def _truncate(rng: random.Random, body: bytearray, _: _Values) -> None:
    del body[rng.randrange(len(body)):]


def _extend(rng: random.Random, body: bytearray, _: _Values) -> None:
    body += rng.randbytes(rng.randint(1, 64))


def _overwrite(rng: random.Random, body: bytearray, _: _Values) -> None:
    for _ in range(rng.randint(1, 4)):
        body[rng.randrange(len(body))] = rng.choice((0x00, 0xFF, 0x80, 0x7F))


_LIES = (b"\xff\xff", b"\xff\xfe", b"\x7f\xff", b"\x80\x00", b"\xff\xff\xff\xff",
         b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00",
         b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80")


def _lie(rng: random.Random, body: bytearray, values: _Values) -> None:
    """A length prefix or varint that lies: at one of the request's strings when there is one
    (null where not nullable, longer, shorter), or anywhere past the header."""
    lie = rng.choice(_LIES)
    if values.strings and rng.random() < 0.6:
        text = rng.choice(values.strings)
        at = body.find(text, 8)
        width = 1 if values.version in values.codec.spec.flexible else 2
        if at >= 8 + width:
            body[at - width:at] = lie
            return
    at = rng.randrange(8, max(9, len(body)))
    body[at:at + rng.choice((0, len(lie)))] = lie


def _header(rng: random.Random, body: bytearray, _: _Values) -> None:
    api_key = rng.choice((rng.randint(-1, 100), rng.choice(sorted(schema.api_names())), -32768))
    version = rng.choice((-1, 0, rng.randint(0, 20), 32767, -32768))
    struct.pack_into(">hh", body, 0, api_key, version)


def _tags(rng: random.Random, body: bytearray, values: _Values) -> None:
    """Garbage tagged fields, in place of the empty top-level section at the end of a flexible
    request (or appended to any other)."""
    section = bytearray(uvarint(rng.choice((1, 2, 3, 200))))
    for _ in range(rng.randint(1, 3)):
        tag = rng.choice((0, 1, 5, 100, 2**31))
        data = rng.randbytes(rng.randint(0, 20))
        size = rng.choice((len(data), len(data) + 5, 2**31))
        section += uvarint(tag) + uvarint(size) + data
    if body and body[-1] == 0 and values.version in values.codec.spec.flexible:
        del body[-1]
    body += section


MUTATIONS: dict[str, Callable[[random.Random, bytearray, _Values], None]] = {
    "flip": _flip, "truncate": _truncate, "extend": _extend, "overwrite": _overwrite,
    "lie": _lie, "header": _header, "tags": _tags}


def _frame_lie(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    how = rng.choice(("longer", "shorter", "negative", "huge", "header-only", "zero", "split"))
    n = len(body)
    if how == "longer":
        return how, struct.pack(">i", n + rng.randint(1, 1_000)) + body
    if how == "shorter":
        return how, struct.pack(">i", rng.randint(0, max(0, n - 1))) + body
    if how == "negative":
        return how, struct.pack(">i", rng.choice((-1, -(2**31), -n))) + body
    if how == "huge":
        return how, struct.pack(">i", rng.choice((2**31 - 1, 100 << 20, 128 << 20))) + body[:8]
    if how == "header-only":
        return how, struct.pack(">i", n)
    if how == "zero":
        return how, struct.pack(">i", 0) + struct.pack(">i", n) + body
    cut = rng.randint(0, len(body))
    return how, struct.pack(">i", n) + body[:cut] + struct.pack(">i", n) + body


# ---- generation ----------------------------------------------------------------------------------

class CaseGenerator:
    """Case ``n`` of a seed: the same bytes every time, for the same advertised APIs."""

    def __init__(self, seed: int, advertised: dict[int, tuple[int, int]]) -> None:
        self.seed = seed
        self.advertised = advertised
        self.keys = sorted(advertised)

    def case(self, number: int) -> Case:
        rng = random.Random(f"{self.seed}:{number}")
        api_key = rng.choice(self.keys)
        low, high = self.advertised[api_key]
        codec = messages.request(api_key)
        version = self._version(rng, codec, low, high)
        valid = codec.spec.valid
        encode_as = min(max(version, valid.low), min(valid.high, 99))
        values = _Values(rng, codec, encode_as, api_key)
        body = bytearray(self._header(rng, codec, api_key, version, number))
        body += codec.encode(values.message(), encode_as)
        roll = rng.random()
        if roll < 0.5:
            low = max(low, REFUSED_THOUGH_ADVERTISED.get(api_key, low))
            checked = values.schema_valid and low <= version <= high and \
                api_key not in CLOSED_ON_PARSE
            return Case(number, api_key, version, "valid", _sized(body), True, checked)
        if roll < 0.9:
            how = rng.choice(tuple(MUTATIONS))
            MUTATIONS[how](rng, body, values)
            return Case(number, api_key, version, f"mutated:{how}", _sized(body), True, False)
        how, data = _frame_lie(rng, bytes(body))
        return Case(number, api_key, version, f"frame:{how}", data, False, False)

    @staticmethod
    def _version(rng: random.Random, codec: MessageCodec, low: int, high: int) -> int:
        if rng.random() < 0.85:
            return rng.randint(low, high)
        outside = [v for v in range(codec.spec.valid.low, min(codec.spec.valid.high, 99) + 1)
                   if not low <= v <= high]
        return rng.choice(outside + [low - 1, high + 1, 32767, -1])

    @staticmethod
    def _header(rng: random.Random, codec: MessageCodec, api_key: int, version: int,
                number: int) -> bytes:
        client = rng.choice((CLIENT_ID, CLIENT_ID, b"", None))
        head = struct.pack(">hhi", api_key, version, number & 0x7FFFFFFF)
        head += b"\xff\xff" if client is None else struct.pack(">h", len(client)) + client
        return head + (b"\x00" if version in codec.spec.flexible else b"")


def _sized(body: bytearray) -> bytes:
    return struct.pack(">i", len(body)) + bytes(body)


# ---- running -------------------------------------------------------------------------------------

OUTCOMES = ("answered", "no response", "closed", "timed out")
BROKER_DOWN = ("crash", "hang", "unhealthy")  # findings after which the run stops


@dataclass
class Finding:
    kind: str  # crash, hang, unhealthy, bad response, closed on valid, traceback
    case: int | None  # None: found between batches, for the range given in detail
    api: str
    detail: str


@dataclass
class FuzzOptions:
    bootstrap: str = "localhost:9092"
    cases: int = 20_000
    seed: int = 0
    first: int = 0  # number of the first case (to replay a finding from its case number)
    apis: list[int] | None = None  # API keys; None: every one the broker advertises
    connections: int = 8
    batch: int = 500  # cases between two health checks
    case_timeout_s: float = 5.0
    health_timeout_s: float = 20.0
    dump: Path | None = None  # where the bytes of cases with findings or timeouts go
    broker_log: Path | None = None  # scanned for new tracebacks after each batch


@dataclass
class FuzzReport:
    seed: int
    cases_run: int = 0
    outcomes: Counter = field(default_factory=Counter)  # (api name, outcome) -> cases
    kinds: Counter = field(default_factory=Counter)  # (kind, outcome) -> cases
    findings: list[Finding] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def broker_down(self) -> bool:
        return any(f.kind in BROKER_DOWN for f in self.findings)


class BrokerDown(Exception):
    """The broker refused a new connection: it is gone."""


class _Connection:
    """One socket to the broker, reopened after the broker closes it."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        if self.writer is not None:
            return
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.timeout_s)
        except (OSError, TimeoutError) as exc:  # refused, reset, or no answer to the SYN
            raise BrokerDown(f"cannot connect to {self.host}:{self.port}: {exc!r}") from None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.transport.abort()  # no lingering: a fuzz run opens many sockets
        self.reader = self.writer = None

    async def read_frame(self) -> bytes | None:
        """The next response frame, None when the broker closed the connection."""
        try:
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise _BadResponse(f"response frame size {size}")
            return await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None


class _BadResponse(Exception):
    pass


class _Stale(Exception):
    """The broker had closed the connection before the case was sent."""


# ApiVersions v0, which every broker answers: the end of a case's responses, and a health check
PROBE = _sized(bytearray(struct.pack(">hhih", API_VERSIONS, 0, PROBE_CORRELATION, len(CLIENT_ID))
                         + CLIENT_ID))


def _check_response(case: Case, frame: bytes) -> str | None:
    """Why a response to ``case`` is wrong, or None."""
    if len(case.data) < 12:
        return f"an answer to a request of {len(case.data) - 4} bytes, too short for a header"
    api_key, version, correlation = struct.unpack_from(">hhi", case.data, 4)
    (got,) = struct.unpack_from(">i", frame)
    if got != correlation:
        return f"correlation id {got} in the answer to a request with {correlation}"
    if api_key not in schema.api_names():
        return None
    codec = messages.response(api_key)
    for candidate in (version, 0) if api_key == API_VERSIONS else (version,):
        if candidate not in codec.spec.valid:
            continue
        flexible = candidate in codec.spec.flexible and api_key != API_VERSIONS
        try:
            response, end = codec.decode(memoryview(frame), candidate, 5 if flexible else 4)
        except DecodeError:
            continue
        if end == len(frame):
            return _answer_problem(response)
    if version not in codec.spec.valid:
        return None
    return f"{messages.api_name(api_key)} v{version} response does not decode"


def _answer_problem(response: object) -> str | None:
    """An error in a decoded response that betrays a broker bug rather than a bad request."""
    for name, value in _fields(response):
        if name.endswith("message") and isinstance(value, str) and PYTHON_TEXT.search(value):
            return f"error text with Python internals: {value!r}"
        if name == "error_code" and value == ErrorCode.UNKNOWN_SERVER_ERROR:
            return "UNKNOWN_SERVER_ERROR (an unexpected exception in the broker)"
    return None


def _fields(message: object) -> Iterator[tuple[str, object]]:
    """(name, value) of every field of a decoded message, nested structs included."""
    for name in getattr(message, "__slots__", ()):
        value = getattr(message, name)
        yield name, value
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "__slots__"):
                yield from _fields(item)


class Fuzzer:
    def __init__(self, options: FuzzOptions,
                 on_case: Callable[[Case, str], None] | None = None) -> None:
        self.options = options
        host, port = options.bootstrap.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.on_case = on_case or (lambda case, outcome: None)
        self.report = FuzzReport(options.seed)
        self.generator: CaseGenerator | None = None
        self._log_offset = 0
        self._timeouts_in_a_row = 0

    async def run(self) -> FuzzReport:
        started = time.monotonic()
        advertised = await self.advertised()
        if self.options.apis is not None:
            advertised = {k: v for k, v in advertised.items() if k in self.options.apis}
            if not advertised:
                raise ValueError(f"the broker advertises none of the APIs {self.options.apis}")
        self.generator = CaseGenerator(self.options.seed, advertised)
        self._log_offset = self._log_size()
        first, last = self.options.first, self.options.first + self.options.cases
        for start in range(first, last, self.options.batch):
            numbers = range(start, min(start + self.options.batch, last))
            before = len(self.report.findings)
            await self._batch(numbers)
            await self._health(numbers)
            if self.report.broker_down:
                self._drop_closes_since(before)
                break
        self.report.elapsed_s = time.monotonic() - started
        return self.report

    async def advertised(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version the broker advertises, for the APIs we have schemas of."""
        conn = _Connection(self.host, self.port, self.options.health_timeout_s)
        await conn.open()
        try:
            conn.writer.write(PROBE)
            frame = await asyncio.wait_for(conn.read_frame(), self.options.health_timeout_s)
        except TimeoutError:
            frame = None
        finally:
            conn.close()
        if frame is None:
            raise BrokerDown("no answer to ApiVersions v0")
        response, _ = messages.response(API_VERSIONS).decode(memoryview(frame), 0, 4)
        names = schema.api_names()
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys
                if k.api_key in names}

    async def _batch(self, numbers: range) -> None:
        cases = iter(numbers)
        workers = [self._worker(cases) for _ in range(min(self.options.connections,
                                                          len(numbers)))]
        results = await asyncio.gather(*workers, return_exceptions=True)
        for result in results:  # BrokerDown: the health check that follows names it
            if isinstance(result, BaseException) and not isinstance(result, BrokerDown):
                raise result

    async def _worker(self, cases: Iterator[int]) -> None:
        conn = _Connection(self.host, self.port, self.options.case_timeout_s)
        try:
            for number in cases:
                if self._timeouts_in_a_row >= self.options.connections:
                    return  # every connection is stuck: the health check says why
                case = self.generator.case(number)
                outcome = await self._send(conn, case)
                self._record(case, outcome)
        finally:
            conn.close()

    async def _send(self, conn: _Connection, case: Case) -> str:
        try:
            return await asyncio.wait_for(self._deliver(conn, case),
                                          self.options.case_timeout_s)
        except TimeoutError:
            conn.close()
            return "timed out"
        except _BadResponse as exc:
            conn.close()
            self._finding("bad response", case, str(exc))
            return "answered"

    async def _deliver(self, conn: _Connection, case: Case) -> str:
        """Send on the open connection; again on a fresh one if the broker had closed it since
        the last case."""
        while True:
            fresh = conn.writer is None
            await conn.open()
            try:
                return await self._exchange(conn, case)
            except _Stale:
                conn.close()
                if fresh:
                    return "closed"

    async def _exchange(self, conn: _Connection, case: Case) -> str:
        try:
            conn.writer.write(case.data)
            if case.framed:
                conn.writer.write(PROBE)
            else:
                conn.writer.write_eof()
            await conn.writer.drain()
        except OSError:
            raise _Stale from None
        answered = False
        while True:
            frame = await conn.read_frame()
            if frame is None:
                conn.close()
                return "answered" if answered else "closed"
            if case.framed and frame[:4] == PROBE[8:12]:
                return "answered" if answered else "no response"
            problem = _check_response(case, frame) if case.framed else None
            if problem is not None:
                raise _BadResponse(problem)
            answered = True

    def _record(self, case: Case, outcome: str) -> None:
        name = messages.api_name(case.api_key)
        self.report.cases_run += 1
        self.report.outcomes[name, outcome] += 1
        self._timeouts_in_a_row = self._timeouts_in_a_row + 1 if outcome == "timed out" else 0
        self.report.kinds[case.kind.partition(":")[0], outcome] += 1
        if outcome == "timed out":
            self.report.timed_out.append(case.number)
            self._dump(case)
        if outcome == "closed" and case.checked:
            self._finding("closed on valid", case,
                          f"{name} v{case.version}, schema-valid, answered by closing")
        self.on_case(case, outcome)

    def _drop_closes_since(self, start: int) -> None:
        """A broker that went down closed the connections of the cases in flight: those closes
        are the crash's, not findings of their own."""
        findings = self.report.findings
        findings[start:] = [f for f in findings[start:] if f.kind != "closed on valid"]

    def _finding(self, kind: str, case: Case | None, detail: str) -> None:
        api = messages.api_name(case.api_key) if case else "-"
        self.report.findings.append(Finding(kind, case.number if case else None, api, detail))
        if case is not None:
            self._dump(case)

    def _dump(self, case: Case) -> None:
        if self.options.dump is not None:
            self.options.dump.mkdir(parents=True, exist_ok=True)
            path = self.options.dump / f"seed{self.options.seed}-case{case.number}.bin"
            path.write_bytes(case.data)

    async def _health(self, numbers: range) -> None:
        """ApiVersions and Metadata (all topics) on a new connection, within the deadline."""
        where = f"after cases {numbers.start}-{numbers.stop - 1}"
        try:
            await asyncio.wait_for(self._health_round_trip(), self.options.health_timeout_s)
        except BrokerDown as exc:
            self._finding("crash", None, f"{where}: {exc}")
        except TimeoutError:
            self._finding("hang", None, f"{where}: no answer to ApiVersions and Metadata "
                                        f"within {self.options.health_timeout_s:.0f}s")
        except (_BadResponse, DecodeError, ConnectionError) as exc:
            self._finding("unhealthy", None, f"{where}: ApiVersions or Metadata failed: {exc}")
        for line in self._new_tracebacks():
            self._finding("traceback", None, f"{where}: {line}")

    async def _health_round_trip(self) -> None:
        conn = _Connection(self.host, self.port, self.options.health_timeout_s)
        await conn.open()
        version = self._metadata_version()
        try:
            for frame, api_key, api_version in ((PROBE, API_VERSIONS, 0),
                                                (self._metadata_frame(version), METADATA, version)):
                conn.writer.write(frame)
                answer = await conn.read_frame()
                if answer is None:
                    raise ConnectionError("the broker closed the connection")
                if answer[:4] != frame[8:12]:
                    raise _BadResponse("wrong correlation id")
                codec = messages.response(api_key)
                flexible = api_version in codec.spec.flexible and api_key != API_VERSIONS
                codec.decode(memoryview(answer), api_version, 5 if flexible else 4)
        finally:
            conn.close()

    def _metadata_version(self) -> int:
        """The newest both sides know (v1+: null topics is every topic)."""
        high = self.generator.advertised.get(METADATA, (1, 1))[1]
        return max(1, min(high, messages.request(METADATA).spec.valid.high))

    @staticmethod
    def _metadata_frame(version: int) -> bytes:
        codec = messages.request(METADATA)
        head = struct.pack(">hhih", METADATA, version, PROBE_CORRELATION + 1, len(CLIENT_ID))
        head += CLIENT_ID + (b"\x00" if version in codec.spec.flexible else b"")
        return _sized(bytearray(head + codec.encode(codec.cls(topics=None), version)))

    def _log_size(self) -> int:
        path = self.options.broker_log
        return path.stat().st_size if path is not None and path.exists() else 0

    def _new_tracebacks(self) -> list[str]:
        """The line before each new 'Traceback' line of the broker's log (the log message)."""
        path = self.options.broker_log
        if path is None or not path.exists():
            return []
        with path.open("rb") as log:
            log.seek(self._log_offset)
            data = log.read()
        self._log_offset += len(data)
        lines = data.decode(errors="replace").splitlines()
        return [lines[i - 1][:300] if i else "Traceback" for i, line in enumerate(lines)
                if line.startswith("Traceback")]


def run_fuzz(options: FuzzOptions,
             on_case: Callable[[Case, str], None] | None = None) -> FuzzReport:
    return asyncio.run(Fuzzer(options, on_case).run())


# ---- the command ---------------------------------------------------------------------------------

def api_keys(names: list[str] | None) -> list[int] | None:
    """API keys from names (``Produce``) or numbers; None for every advertised API."""
    if not names:
        return None
    by_name = {name.lower(): key for key, name in schema.api_names().items()}
    keys = []
    for name in names:
        key = int(name) if name.lstrip("-").isdigit() else by_name.get(name.lower())
        if key is None:
            raise ValueError(f"unknown API {name!r}; one of {', '.join(sorted(by_name))}")
        keys.append(key)
    return keys


def summary_table(report: FuzzReport) -> Table:
    table = Table(title=f"fuzz seed {report.seed}: {report.cases_run} cases in "
                        f"{report.elapsed_s:.0f}s, {len(report.findings)} findings")
    table.add_column("API")
    for outcome in OUTCOMES:
        table.add_column(outcome, justify="right")
    for api in sorted({api for api, _ in report.outcomes}):
        table.add_row(api, *(str(report.outcomes[api, o] or "") for o in OUTCOMES))
    return table


def main(options: FuzzOptions) -> FuzzReport:
    console = Console()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"fuzzing {options.bootstrap}", total=options.cases)

        def on_case(case: Case, outcome: str) -> None:
            progress.update(task, advance=1, description=f"case {case.number}: "
                            f"{messages.api_name(case.api_key)} {case.kind} {outcome}")
        report = run_fuzz(options, on_case)
    console.print(summary_table(report))
    for finding in report.findings:
        case = f"case {finding.case} " if finding.case is not None else ""
        console.print(f"[red]{finding.kind}[/] {case}({finding.api}): {finding.detail}")
    if report.timed_out:
        console.print(f"timed out: cases {', '.join(map(str, report.timed_out[:20]))}")
    console.print(f"replay: --seed {report.seed} --first N --cases 1 (--dump DIR keeps the bytes)")
    return report
