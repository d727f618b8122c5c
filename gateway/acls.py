"""What the ACL APIs share: CommitGate has no authorizer, so Kafka's answer without one.

A Kafka broker with no ``authorizer.class.name`` answers CreateAcls, DescribeAcls and DeleteAcls
with SECURITY_DISABLED (AclApis). Before that, the request's parser refuses a creation or filter
holding the UNKNOWN code (0) of a resource type, pattern type, operation or permission type,
which closes the connection; ``check_known`` makes the same refusal.
"""
from __future__ import annotations

from protocol.codec import DecodeError

UNKNOWN = 0  # ResourceType, PatternType, AclOperation and AclPermissionType's UNKNOWN code
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"  # DescribeAcls' own words


def check_known(what: str, **codes: int) -> None:
    """Refuse ``what`` (a creation or filter) when one of its codes is UNKNOWN."""
    unknown = [name for name, code in codes.items() if code == UNKNOWN]
    if unknown:
        raise DecodeError(f"{what} has the UNKNOWN code for {', '.join(unknown)}")
