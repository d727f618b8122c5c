"""A minimal Kafka wire client for exact control of the bytes sent (bad frames, corrupt batches,
explicit versions in the gateway tests) and for reading stored batches as they are (the
compatibility matrix). Built on protocol's own codecs; the requests it builds are cross-checked
against kafka-python's encoder in tests/protocol."""
from __future__ import annotations

import socket
import struct
from typing import Self

from commitgate.protocol import messages

CLIENT_ID = "commitgate-tests"


class WireClient:
    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def frame(self, api_key: int, version: int, request: object) -> bytes:
        codec = messages.request(api_key)
        flexible = version in codec.spec.flexible
        self.correlation += 1
        client = CLIENT_ID.encode()
        header = struct.pack(">hhih", api_key, version, self.correlation, len(client)) + client
        if flexible:
            header += b"\x00"
        body = header + codec.encode(request, version)
        return struct.pack(">i", len(body)) + body

    def request(self, api_key: int, version: int, request: object) -> object:
        self.sock.sendall(self.frame(api_key, version, request))
        return self.read_response(api_key, version)

    def read_response(self, api_key: int, version: int) -> object:
        data = self.read_frame()
        (correlation,) = struct.unpack_from(">i", data)
        assert correlation == self.correlation, (correlation, self.correlation)
        codec = messages.response(api_key)
        pos = 4
        if version in codec.spec.flexible and api_key != 18:
            pos += 1  # empty tagged fields of response header v1
        response, end = codec.decode(memoryview(data), version, pos)
        assert end == len(data), f"{end} of {len(data)} bytes decoded"
        return response

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)

    def is_closed_by_peer(self) -> bool:
        """True once the broker closed the socket (reads EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
