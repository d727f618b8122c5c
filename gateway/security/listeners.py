"""Listeners by security protocol, with Kafka's settings: ``listeners`` (``NAME://host:port``
entries, comma-separated), ``advertised.listeners`` (by the same names) and
``listener.security.protocol.map`` (``NAME:PROTOCOL`` pairs; by default each protocol's own name
maps to it). A listener's name picks its protocol; clients are told the advertised address of
the listener they connected to."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from commitgate.gateway.endpoint import Endpoint


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP = {p.value: p for p in SecurityProtocol}


@dataclass(frozen=True)
class ListenerSpec:
    """One listener: its name (upper case, as Kafka keeps it), protocol and bind address."""

    name: str
    protocol: SecurityProtocol
    endpoint: Endpoint

    def __str__(self) -> str:
        return f"{self.name}://{self.endpoint}"


def parse_addresses(text: str) -> dict[str, Endpoint]:
    """``NAME://host:port`` entries by name; a bare ``host:port`` is the PLAINTEXT listener."""
    found: dict[str, Endpoint] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, address = item.rpartition("://")
        name = name.upper() if sep else "PLAINTEXT"
        if not name.replace("_", "").isalnum():
            raise ValueError(f"listener {item!r}: a listener name is letters, digits and _")
        if name in found:
            raise ValueError(f"listener name {name} appears twice")
        found[name] = Endpoint.parse(address, item)
    if not found:
        raise ValueError("expected at least one NAME://host:port")
    return found


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``NAME:PROTOCOL`` pairs (``listener.security.protocol.map``)."""
    mapping: dict[str, SecurityProtocol] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        try:
            mapping[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ValueError(f"expected NAME:PROTOCOL pairs with a protocol among "
                             f"{[p.value for p in SecurityProtocol]}, got {item!r}") from None
        if not sep:
            raise ValueError(f"expected NAME:PROTOCOL, got {item!r}")
    return mapping


def resolve(addresses: dict[str, Endpoint], protocols: dict[str, SecurityProtocol],
            advertised: dict[str, Endpoint] | None) -> tuple[tuple[ListenerSpec, ...],
                                                         dict[str, Endpoint]]:
    """The listeners and their advertised addresses; a ValueError names the setting at fault."""
    listeners = []
    for name, endpoint in addresses.items():
        protocol = protocols.get(name)
        if protocol is None:
            raise ValueError(f"listeners: listener {name} has no security protocol in "
                             f"listener.security.protocol.map")
        listeners.append(ListenerSpec(name, protocol, endpoint))
    ports = [spec.endpoint.port for spec in listeners if spec.endpoint.port]
    if len(ports) != len(set(ports)):
        raise ValueError("listeners: two listeners share a port")
    shown = dict(advertised or {})
    unknown = sorted(set(shown) - set(addresses))
    if unknown:
        raise ValueError(f"advertised.listeners: {', '.join(unknown)} is not among listeners")
    for name, endpoint in addresses.items():
        shown.setdefault(name, default_advertised(endpoint))
    return tuple(listeners), shown


def default_advertised(endpoint: Endpoint) -> Endpoint:
    """A listener's own address, a wildcard or 127.0.0.1 shown as localhost."""
    host = endpoint.host
    if host in ("127.0.0.1", "0.0.0.0", "", "::"):
        host = "localhost"
    return Endpoint(host, endpoint.port)
