"""ACL bindings (a resource pattern and an entry: principal, host, operation, allow or deny),
what CreateAcls adds, DescribeAcls lists and DeleteAcls removes, with Kafka's codes, validation
and filter matching. Kept, atomically replaced, in ``<data>/broker/acls.json``."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from commitgate.engine.topic_table import atomic_write

log = logging.getLogger(__name__)

FILE_NAME = "acls.json"
# ResourceType, PatternType, AclOperation and AclPermissionType codes (Kafka's)
ANY = 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
MATCH, LITERAL, PREFIXED = 2, 3, 4
ALL = 2
DENY, ALLOW = 2, 3
RESOURCE_TYPES = frozenset({TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER})
OPERATIONS = frozenset(range(2, 15))  # ALL .. DESCRIBE_TOKENS
WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def covers(self, resource_type: int, name: str) -> bool:
        """Whether this binding's pattern applies to the resource ``name`` of that type."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: None fields match anything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclBinding) -> bool:
        return (self.resource_type in (ANY, acl.resource_type)
                and self._pattern_matches(acl)
                and self.principal in (None, acl.principal)
                and self.host in (None, acl.host)
                and self.operation in (ANY, acl.operation)
                and self.permission in (ANY, acl.permission))

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type == MATCH:  # the patterns that would apply to this literal name
            return self.resource_name is None or acl.pattern_type == LITERAL and \
                acl.resource_name in (self.resource_name, WILDCARD) or \
                acl.pattern_type == PREFIXED and self.resource_name.startswith(acl.resource_name)
        if self.pattern_type not in (ANY, acl.pattern_type):
            return False
        return self.resource_name in (None, acl.resource_name)


def creation_error(acl: AclBinding) -> str | None:
    """Why Kafka refuses to create ``acl`` (INVALID_REQUEST), or None."""
    if acl.resource_type not in RESOURCE_TYPES:
        return "Invalid resourceType " + str(acl.resource_type)
    if acl.pattern_type not in (LITERAL, PREFIXED):
        return "Invalid patternType " + str(acl.pattern_type)
    if acl.operation not in OPERATIONS:
        return "Invalid operation " + str(acl.operation)
    if acl.permission not in (DENY, ALLOW):
        return "Invalid permissionType " + str(acl.permission)
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{acl.principal}` (no colon is present " \
               f"separating the principal type from the principal name)"
    if not acl.host:
        return "Invalid null host"
    return None


class AclStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.bindings: set[AclBinding] = set()
        self.by_type: dict[int, list[AclBinding]] = {}  # what an authorization walks
        if self.path.exists():
            self.bindings = {AclBinding(**b) for b in json.loads(self.path.read_text())["acls"]}
            self._index()

    def add(self, acls: list[AclBinding]) -> None:
        self.bindings.update(acls)
        self._index()
        self._save()
        log.info("ACLs created: %s", acls)

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(b for b in self.bindings if acl_filter.matches(b))

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding two filters match shows under both)."""
        removed = [self.describe(f) for f in filters]
        gone = {b for matched in removed for b in matched}
        if gone:
            self.bindings -= gone
            self._index()
            self._save()
            log.info("ACLs deleted: %s", sorted(gone))
        return removed

    def covering(self, resource_type: int, name: str) -> list[AclBinding]:
        return [b for b in self.by_type.get(resource_type, ()) if b.covers(resource_type, name)]

    def _index(self) -> None:
        self.by_type = {}
        for binding in sorted(self.bindings):
            self.by_type.setdefault(binding.resource_type, []).append(binding)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": 1, "acls": [asdict(b) for b in sorted(self.bindings)]}
        atomic_write(self.path, json.dumps(body, sort_keys=True).encode())
