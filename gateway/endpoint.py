"""A host and port, as listeners are written (``host:port``, IPv6 hosts in brackets)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, address: str, given: str | None = None) -> Endpoint:
        """``host:port`` or ``:port`` (all interfaces); ``given`` is the text the error quotes."""
        host, sep, port = address.strip().rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"expected [NAME://]host:port, got {given or address!r}")
        return cls(host.strip("[]"), int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def on_loopback(self) -> bool:
        """Only this machine reaches it (a wildcard host is every interface)."""
        return self.host in ("localhost", "::1") or self.host.startswith("127.")
