"""What a handler knows about the request it serves besides the decoded body."""
from __future__ import annotations

from dataclasses import dataclass

from commitgate.gateway.broker import Broker
from commitgate.gateway.quotas.manager import ClientQuota


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_version: int
    client_id: str | None
    peer: str  # host:port of the client
    quota: ClientQuota | None = None  # the client's quotas, if any applies

    def who(self) -> str:
        """Names the client in logs."""
        return f"client {self.client_id!r} at {self.peer}"
