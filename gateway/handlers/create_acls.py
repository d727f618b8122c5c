"""CreateAcls (key 30), v1-3: SECURITY_DISABLED for every creation, as a Kafka broker without
an authorizer answers (gateway/acls.py)."""
from __future__ import annotations

from commitgate.gateway.acls import NO_AUTHORIZER, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 30
VERSIONS = (1, 3)

Response = messages.get("CreateAclsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    for i, acl in enumerate(request.creations):
        check_known(f"ACL creation {i} (resource {acl.resource_name!r})",
                    resource_type=acl.resource_type, pattern_type=acl.resource_pattern_type,
                    operation=acl.operation, permission_type=acl.permission_type)
    return Response(throttle_time_ms=0, results=[
        Response.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED,
                                   error_message=NO_AUTHORIZER)
        for _ in request.creations])
