"""What the ACL APIs share, and the authorized operations answered without an authorizer.

A Kafka broker with no ``authorizer.class.name`` answers CreateAcls, DescribeAcls and DeleteAcls
with SECURITY_DISABLED (AclApis); with one, gateway/security/ holds the ACLs and decides. Before that, the request's parser refuses a creation or filter
holding the UNKNOWN code (0) of a resource type, pattern type, operation or permission type,
which closes the connection; ``check_known`` makes the same refusal.
"""
from __future__ import annotations

from commitgate.protocol.codec import DecodeError

UNKNOWN = 0  # ResourceType, PatternType, AclOperation and AclPermissionType's UNKNOWN code
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # DescribeAcls' own words

# Authorized operations as Metadata, DescribeCluster and the group describes report them: a bit
# per AclOperation code. Without an authorizer Kafka allows every operation a resource type
# supports (AuthHelper.authorizedOperations over AclEntry.supportedOperations).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 3, 4, 5, 6, 7, 8, 9
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
OPERATIONS_NOT_REQUESTED = -2147483648  # the schemas' default: not asked for, or not computed


def _bits(*operations: int) -> int:
    return sum(1 << code for code in operations)


TOPIC_OPERATIONS = _bits(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS,
                         ALTER_CONFIGS)  # 3576
GROUP_OPERATIONS = _bits(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)  # 3400
CLUSTER_OPERATIONS = _bits(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                           IDEMPOTENT_WRITE, ALTER, DESCRIBE)  # 8096


def check_known(what: str, **codes: int) -> None:
    """Refuse ``what`` (a creation or filter) when one of its codes is UNKNOWN."""
    unknown = [name for name, code in codes.items() if code == UNKNOWN]
    if unknown:
        raise DecodeError(f"{what} has the UNKNOWN code for {', '.join(unknown)}")
