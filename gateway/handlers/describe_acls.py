"""DescribeAcls (key 29), v1-3: the ACL bindings a filter matches, grouped by resource pattern;
DESCRIBE on the cluster is needed. Without an authorizer: SECURITY_DISABLED, as Kafka's."""
from __future__ import annotations

import itertools

from commitgate.gateway.acls import NO_AUTHORIZER_DESCRIBE, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, AclFilter
from commitgate.gateway.security.authorizer import CLUSTER_DENIED, DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 29
VERSIONS = (1, 3)

Response = messages.get("DescribeAclsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    check_known("the ACL filter", resource_type=request.resource_type_filter,
                pattern_type=request.pattern_type_filter, operation=request.operation,
                permission_type=request.permission_type)
    if not ctx.broker.authorizer.enabled:
        return Response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                        error_message=NO_AUTHORIZER_DESCRIBE, resources=[])
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_DENIED, resources=[])
    found = ctx.broker.acls.describe(AclFilter(
        request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
        request.principal_filter, request.host_filter, request.operation,
        request.permission_type))
    resources = [Response.DescribeAclsResource(
        resource_type=kind, resource_name=name, pattern_type=pattern,
        acls=[Response.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                                      permission_type=b.permission) for b in group])
        for (kind, name, pattern), group in itertools.groupby(
            found, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type))]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                    resources=resources)
