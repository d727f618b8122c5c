"""Request and response headers (RequestHeader v1-v2, ResponseHeader v0-v1).

Which header version goes with a request follows from whether the API version is flexible;
ApiVersions responses always use header v0 so that a client can read the reply even when the
broker does not support the version it asked for.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from commitgate.protocol.codec import DecodeError, _skip_tags, uvarint

API_VERSIONS_KEY = 18
_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_CORRELATION = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header takes; the body starts here


def peek_api(frame: memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a frame, before anything else is known."""
    if len(frame) < 8:
        raise DecodeError(f"a request of {len(frame)} bytes has no header")
    return struct.unpack_from(">hhi", frame, 0)


def decode_request_header(frame: memoryview, flexible: bool) -> RequestHeader:
    """Header v1 (v2 when ``flexible``: tagged fields follow the client id)."""
    if len(frame) < _FIXED.size:
        raise DecodeError(f"a request of {len(frame)} bytes has no header")
    api_key, api_version, correlation_id, n = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise DecodeError("client id runs past the end of the request")
        client_id = str(frame[pos : pos + n], "utf-8", "replace")
        pos += n
    if flexible:
        _, pos = _skip_tags(frame, pos, {})
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def response_header(correlation_id: int, flexible: bool, api_key: int) -> bytes:
    """ResponseHeader v1 (with an empty tagged-field section) for flexible versions, else v0."""
    head = _CORRELATION.pack(correlation_id)
    if flexible and api_key != API_VERSIONS_KEY:
        return head + uvarint(0)
    return head
