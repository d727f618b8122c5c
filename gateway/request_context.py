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

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether the client's principal may perform ``operation`` on the resource (always,
        with the authorizer off)."""
        authorizer = self.broker.authorizer
        return not authorizer.enabled or authorizer.allowed(
            self.session.principal, self.host, operation, resource_type, name)

    def allowed_on_any(self, operation: int, resource_type: int) -> bool:
        return self.broker.authorizer.allowed_on_any(self.session.principal, self.host,
                                                     operation, resource_type)

    def operations(self, resource_type: int, name: str, supported: int) -> int:
        """The bits of the ``supported`` operations the principal may perform on the resource
        (all of them with the authorizer off, as Kafka answers without one)."""
        authorizer = self.broker.authorizer
        if not authorizer.enabled:
            return supported
        return authorizer.operations(self.session.principal, self.host, resource_type, name,
                                     supported)

    @property
    def host(self) -> str:
        return self.peer.rpartition(":")[0]

    @property
    def listener(self) -> str:
        """The name of the listener the client connected to."""
        return self.session.listener.name

    def who(self) -> str:
        """Names the client in logs."""
        return f"client {self.client_id!r} at {self.peer}"
