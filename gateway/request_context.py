"""What a handler knows about the request it serves besides the decoded body."""
from __future__ import annotations

from dataclasses import dataclass

from commitgate.gateway.broker import Broker
from commitgate.gateway.quotas.manager import ClientQuota
from commitgate.gateway.security.session import ClientSession


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    api_version: int
    client_id: str | None
    peer: str  # host:port of the client
    session: ClientSession  # the listener it came in on, its principal, its SASL state
    quota: ClientQuota | None = None  # the client's quotas, if any applies

    @property
    def listener(self) -> str:
        """The name of the listener the client connected to."""
        return self.session.listener.name

    def who(self) -> str:
        """Names the client in logs."""
        return f"client {self.client_id!r} at {self.peer}"
