"""Authorization with Kafka's rules (StandardAuthorizer), on when ``authorizer.class.name`` is
set: a super user may do anything; otherwise the ACLs covering a resource (literal name,
literal ``*``, or a prefix of it) that name the principal (or ``User:*``) and the client's host
(or ``*``) decide: a DENY for the operation (or ALL) wins, then an ALLOW for it, ALL, or an
operation that implies it (READ, WRITE, DELETE or ALTER imply DESCRIBE; ALTER_CONFIGS implies
DESCRIBE_CONFIGS). A resource no ACL covers at all is allowed only with
``allow.everyone.if.no.acl.found=true``. With the authorizer off everything is allowed, as
Kafka without one."""
from __future__ import annotations

from commitgate.gateway.security.acl_store import (
    ALL,
    ALLOW,
    DENY,
    WILDCARD,
    AclBinding,
    AclStore,
)

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
IMPLYING = {DESCRIBE: frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER}),
            DESCRIBE_CONFIGS: frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})}
ANY_USER = "User:*"
CLUSTER_DENIED = "Cluster authorization failed."  # Kafka's words (Errors' default messages)


class Authorizer:
    def __init__(self, store: AclStore, enabled: bool, super_users: tuple[str, ...],
                 allow_if_no_acl: bool) -> None:
        self.store = store
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def allowed(self, principal: str, host: str, operation: int, resource_type: int,
                name: str) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        covering = self.store.covering(resource_type, name)
        if not covering:
            return self.allow_if_no_acl
        mine = [a for a in covering if _applies(a, principal, host)]
        if any(a.permission == DENY and a.operation in (operation, ALL) for a in mine):
            return False
        implying = IMPLYING.get(operation, frozenset({operation}))
        return any(a.permission == ALLOW and (a.operation == ALL or a.operation in implying)
                   for a in mine)

    def allowed_on_any(self, principal: str, host: str, operation: int,
                       resource_type: int) -> bool:
        """Whether some resource of the type allows the operation (Kafka's
        authorizeByResourceType: an idempotent producer needs WRITE on some topic)."""
        if not self.enabled or principal in self.super_users:
            return True
        mine = [a for a in self.store.by_type.get(resource_type, ())
                if _applies(a, principal, host)]
        return any(a.permission == ALLOW and a.operation in (operation, ALL) for a in mine) and \
            not any(a.permission == DENY and a.operation in (operation, ALL) and
                    a.resource_name == WILDCARD for a in mine)

    def operations(self, principal: str, host: str, resource_type: int, name: str,
                   supported: int) -> int:
        """The bits of the ``supported`` operations the principal may perform on the resource
        (the authorized operations Metadata and the describes report)."""
        bits = 0
        for operation in range(supported.bit_length()):
            if supported >> operation & 1 and self.allowed(principal, host, operation,
                                                          resource_type, name):
                bits |= 1 << operation
        return bits


def _applies(acl: AclBinding, principal: str, host: str) -> bool:
    return acl.principal in (principal, ANY_USER) and acl.host in (host, WILDCARD)
