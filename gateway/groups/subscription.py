"""Reads the topics out of a "consumer" protocol member's subscription metadata
(ConsumerProtocolSubscription: version int16, topics [string], ...; every version starts so).
The broker only relays assignments; it needs the topics for OffsetDelete and offset expiry."""
from __future__ import annotations

import functools
import struct

HEADER = struct.Struct(">hi")  # version, topic count
STRING_LEN = struct.Struct(">h")


@functools.lru_cache(maxsize=1024)
def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The subscribed topics, or none when the metadata cannot be read (a client's own format)."""
    try:
        _version, count = HEADER.unpack_from(metadata, 0)
        pos, topics = HEADER.size, []
        for _ in range(max(count, 0)):
            (size,) = STRING_LEN.unpack_from(metadata, pos)
            pos += STRING_LEN.size
            if size < 0 or pos + size > len(metadata):
                return frozenset()
            topics.append(metadata[pos:pos + size].decode())
            pos += size
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return frozenset()
