"""What a handler knows about the request it serves besides the decoded body."""
from __future__ import annotations

from dataclasses import dataclass

from gateway.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_version: int
    client_id: str | None
    peer: str  # host:port of the client

    def who(self) -> str:
        """Names the client in logs."""
        return f"client {self.client_id!r} at {self.peer}"
