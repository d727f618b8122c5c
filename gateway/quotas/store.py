"""Client quota configs: what AlterClientQuotas sets and DescribeClientQuotas shows.

An entity is a set of (entity type, name) pairs; a name of None is the type's default entity.
Validation and its messages are those of Kafka's ClientQuotaControlManager, matching those of
its ClientQuotasImage. The table is kept, atomically replaced, in
``<data>/broker/client_quotas.json`` (as the dynamic broker configs are), so it survives restarts.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from commitgate.engine.topic_table import atomic_write
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Java's HashMap order of the three names: how Kafka lists an entity's parts
ENTITY_TYPES = (IP, CLIENT_ID, USER)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
# Kafka's QuotaConfig: the keys of user / client-id entities and of ip entities, with types
CLIENT_KEYS = {PRODUCER_BYTE_RATE: LONG, CONSUMER_BYTE_RATE: LONG, REQUEST_PERCENTAGE: DOUBLE,
               CONTROLLER_MUTATION_RATE: DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: INT}
TYPE_MAX = {LONG: 2.0 ** 63 - 1, INT: 2.0 ** 31 - 1}
TYPE_NAMES = {LONG: "a LONG", INT: "an INT"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# ((type, name or None), ...) in ENTITY_TYPES order
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(Exception):
    """A refused request or entity: Kafka's error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity a request names; a type given twice keeps its last name, as Kafka's map."""
    given = dict(pairs)
    order = {t: i for i, t in enumerate(ENTITY_TYPES)}
    return tuple(sorted(given.items(), key=lambda item: (order.get(item[0], -1), item[0])))


def show(entity: Entity) -> str:
    """As Kafka's ClientQuotaEntity.toString, which its messages quote."""
    return "ClientQuotaEntity(entries={" + ", ".join(
        f"{kind}={'null' if name is None else name}" for kind, name in entity) + "})"


@dataclass(frozen=True)
class Alteration:
    entity: Entity
    ops: list[tuple[str, float | None]]  # (key, value); None removes the key


class ClientQuotaStore:
    """The quota table (the only writer); ``changed`` is called after every applied change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entities: dict[Entity, dict[str, float]] = {}
        self.changed = lambda: None

    def load(self) -> None:
        if not self.path.exists():
            return
        for item in json.loads(self.path.read_text()):
            entity = entity_of((kind, name) for kind, name in item["entity"])
            self.entities[entity] = {key: float(value) for key, value in item["quotas"].items()}
        log.info("client quotas: %d entities loaded", len(self.entities))

    def alter(self, alterations: list[Alteration], validate_only: bool
              ) -> dict[Entity, QuotaError | None]:
        """Each entity's outcome (None: done), in request order. As Kafka, an entity named
        twice, or with a key given twice, is answered "Ignoring duplicate entity"; the valid
        entities are applied together (unless ``validate_only``), whatever the others'."""
        results: dict[Entity, QuotaError | None] = {}
        updates: dict[Entity, dict[str, float | None]] = {}
        for alteration in alterations:
            entity, ops = alteration.entity, dict(alteration.ops)
            if len(ops) < len(alteration.ops) or entity in results:
                results[entity] = QuotaError(ErrorCode.INVALID_REQUEST,
                                             f"Ignoring duplicate entity {show(entity)}")
                continue
            problem = _entity_error(entity) or _ops_error(entity, ops)
            results[entity] = problem
            if problem is None:
                updates[entity] = ops
        if not validate_only and any(updates.values()):
            self._apply(updates)
        return results

    def _apply(self, updates: dict[Entity, dict[str, float | None]]) -> None:
        for entity, ops in updates.items():
            quotas = self.entities.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    quotas.pop(key, None)
                else:
                    quotas[key] = value
            if not quotas:
                del self.entities[entity]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = [{"entity": list(entity), "quotas": quotas}
                for entity, quotas in self.entities.items()]
        atomic_write(self.path, json.dumps(body, sort_keys=True).encode())
        log.info("client quotas altered: %s", {show(e): ops for e, ops in updates.items()})
        self.changed()

    def describe(self, components: list, strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a DescribeClientQuotas filter matches (ClientQuotasImage.describe)."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for c in components:
            _check_component(c, exact, specified)
            if c.match_type == MATCH_SPECIFIED:
                specified.add(c.entity_type)
            else:
                exact[c.entity_type] = c.match
        named = set(exact) | specified
        if IP in named and {USER, CLIENT_ID} & named:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component "
                             "combination. IP filter component should not be used with user "
                             "or clientId filter component.")
        wanted = len(exact) + len(specified)
        return [(entity, dict(quotas)) for entity, quotas in self.entities.items()
                if _matches(dict(entity), exact, specified) and
                (not strict or len(entity) == wanted)]


def _check_component(c, exact: dict[str, str | None], specified: set[str]) -> None:
    kind = c.entity_type
    if not kind:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
    if kind in exact or kind in specified:
        raise QuotaError(ErrorCode.INVALID_REQUEST,
                         f"Entity type {kind} cannot appear more than once in the filter.")
    if kind not in ENTITY_TYPES:
        raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
    if c.match_type == MATCH_EXACT and c.match is None:
        raise QuotaError(ErrorCode.INVALID_REQUEST,
                         "Request specified MATCH_TYPE_EXACT, but set match string to null.")
    if c.match_type == MATCH_DEFAULT and c.match is not None:
        raise QuotaError(ErrorCode.INVALID_REQUEST,
                         "Request specified MATCH_TYPE_DEFAULT, but also specified a match "
                         "string.")
    if c.match_type == MATCH_SPECIFIED and c.match is not None:
        raise QuotaError(ErrorCode.INVALID_REQUEST,
                         "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                         "string.")
    if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")


def _matches(parts: dict[str, str | None], exact: dict[str, str | None],
             specified: set[str]) -> bool:
    return all(kind in parts and parts[kind] == name for kind, name in exact.items()) and \
        all(kind in parts for kind in specified)


def _entity_error(entity: Entity) -> QuotaError | None:
    if not entity:
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in ENTITY_TYPES:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"Unhandled client quota entity type: {kind}")
        if name == "":
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported")
    parts = dict(entity)
    if IP in parts and len(parts) > 1:  # Kafka's message, its missing space included
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP "
                          "entity shouldnot be combined with User or ClientId")
    if parts.get(IP) is not None and not _is_ip(parts[IP]):
        return QuotaError(ErrorCode.INVALID_REQUEST,
                          f"{parts[IP]} is not a valid IP or resolvable host.")
    return None


def _is_ip(text: str) -> bool:
    """An IP address literal (Kafka also resolves host names; CommitGate does not look names
    up on the event loop)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ops_error(entity: Entity, ops: dict[str, float | None]) -> QuotaError | None:
    keys = IP_KEYS if dict(entity).keys() == {IP} else CLIENT_KEYS
    for key, value in ops.items():
        if value is None:  # removing a key that is not set does nothing, whatever its name
            continue
        kind = keys.get(key)
        if kind is None:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if not value > 0.0:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
        if kind is DOUBLE:
            continue
        if value > TYPE_MAX[kind]:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"Proposed value for {key} is too large for {TYPE_NAMES[kind]}.")
        if math.fmod(value, 1.0) > 1e-6:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"{key} cannot be a fractional value.")
    return None
