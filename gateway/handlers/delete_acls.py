"""DeleteAcls (key 31), v1-3: SECURITY_DISABLED for every filter, as a Kafka broker without an
authorizer answers (gateway/acls.py)."""
from __future__ import annotations

from commitgate.gateway.acls import NO_AUTHORIZER, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 31
VERSIONS = (1, 3)

Response = messages.get("DeleteAclsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    for i, acl in enumerate(request.filters):
        check_known(f"ACL filter {i}", resource_type=acl.resource_type_filter,
                    pattern_type=acl.pattern_type_filter, operation=acl.operation,
                    permission_type=acl.permission_type)
    return Response(throttle_time_ms=0, filter_results=[
        Response.DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED,
                                        error_message=NO_AUTHORIZER, matching_acls=[])
        for _ in request.filters])
