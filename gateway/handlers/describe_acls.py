"""DescribeAcls (key 29), v1-3: SECURITY_DISABLED, as a Kafka broker without an authorizer
answers (gateway/acls.py)."""
from __future__ import annotations

from commitgate.gateway.acls import NO_AUTHORIZER_DESCRIBE, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 29
VERSIONS = (1, 3)

Response = messages.get("DescribeAclsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    check_known("the ACL filter", resource_type=request.resource_type_filter,
                pattern_type=request.pattern_type_filter, operation=request.operation,
                permission_type=request.permission_type)
    return Response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                    error_message=NO_AUTHORIZER_DESCRIBE, resources=[])
