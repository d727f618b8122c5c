"""DeleteAcls (key 31), v1-3: remove the ACL bindings each filter matches and list them; ALTER on
the cluster is needed. Without an authorizer: SECURITY_DISABLED for every filter, as Kafka's."""
from __future__ import annotations

from commitgate.gateway.acls import NO_AUTHORIZER, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, AclFilter
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 31
VERSIONS = (1, 3)

Response = messages.get("DeleteAclsResponse").cls


def _result(error: ErrorCode, message: str | None = None, matching: list | None = None) -> object:
    return Response.DeleteAclsFilterResult(error_code=error, error_message=message,
                                           matching_acls=matching or [])


async def handle(ctx: RequestContext, request) -> object:
    for i, acl in enumerate(request.filters):
        check_known(f"ACL filter {i}", resource_type=acl.resource_type_filter,
                    pattern_type=acl.pattern_type_filter, operation=acl.operation,
                    permission_type=acl.permission_type)
    if not ctx.broker.authorizer.enabled:
        return Response(throttle_time_ms=0, filter_results=[
            _result(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) for _ in request.filters])
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, filter_results=[
            _result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _ in request.filters])
    removed = ctx.broker.acls.delete([AclFilter(
        f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
        f.principal_filter, f.host_filter, f.operation, f.permission_type)
        for f in request.filters])
    return Response(throttle_time_ms=0, filter_results=[_result(ErrorCode.NONE, matching=[
        Response.DeleteAclsMatchingAcl(
            error_code=ErrorCode.NONE, error_message=None, resource_type=b.resource_type,
            resource_name=b.resource_name, pattern_type=b.pattern_type, principal=b.principal,
            host=b.host, operation=b.operation, permission_type=b.permission) for b in matched])
        for matched in removed])
