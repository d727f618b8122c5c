"""What a datagram holds (``udp.format``) and which partition its record goes to.

- ``raw``: the whole datagram is the value, without a key, for ``udp.topic``.
- ``tsv``: ``TOPIC<TAB>KEY<TAB>VALUE``; the value is the rest of the datagram (tabs and
  newlines included), an empty topic means ``udp.topic`` and an empty key means no key.
- ``json``: an object ``{"topic": ..., "key": ..., "value": ...}``; ``topic`` and ``key`` are
  optional strings, a string ``value`` is stored as its UTF-8 bytes and any other JSON value
  (object, number, ...) as its compact JSON text; ``null`` is a null value (a tombstone).
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable

# (topic or None for udp.topic, key, value)
Parsed = tuple[str | None, bytes | None, bytes | None]


class Malformed(ValueError):
    """A datagram the format cannot read; the text says why (never the datagram itself)."""


def parse_raw(data: bytes) -> Parsed:
    return None, None, data


def parse_tsv(data: bytes) -> Parsed:
    parts = data.split(b"\t", 2)
    if len(parts) != 3:
        raise Malformed("expected TOPIC<TAB>KEY<TAB>VALUE")
    topic, key, value = parts
    try:
        name = topic.decode() or None
    except UnicodeDecodeError:
        raise Malformed("the topic is not UTF-8") from None
    return name, key or None, value


def parse_json(data: bytes) -> Parsed:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise Malformed("not a JSON document") from None
    if not isinstance(doc, dict) or "value" not in doc:
        raise Malformed('expected an object with a "value"')
    topic, key, value = doc.get("topic"), doc.get("key"), doc["value"]
    if not isinstance(topic, str | None) or not isinstance(key, str | None):
        raise Malformed('"topic" and "key" must be strings')
    if value is not None and not isinstance(value, str):
        value = json.dumps(value, separators=(",", ":"))
    return (topic or None, key.encode() if key else None,
            value.encode() if value is not None else None)


FORMATS: dict[str, Callable[[bytes], Parsed]] = {
    "raw": parse_raw, "tsv": parse_tsv, "json": parse_json}


@functools.lru_cache(maxsize=65_536)  # keys repeat (sensor or host ids): hash each once
def murmur2(key: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c) as a signed 32-bit int."""
    m, length = 0x5BD1E995, len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i:i + 4], "little") * m & 0xFFFFFFFF
        k = (k ^ (k >> 24)) * m & 0xFFFFFFFF
        h = (h * m & 0xFFFFFFFF) ^ k
    tail = length & 3
    if tail:
        h = (h ^ int.from_bytes(key[whole:], "little")) * m & 0xFFFFFFFF
    h = (h ^ (h >> 13)) * m & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
