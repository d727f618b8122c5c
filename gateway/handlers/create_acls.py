"""CreateAcls (key 30), v1-3: add ACL bindings (gateway/security/acl_store.py), each checked as
Kafka checks it (INVALID_REQUEST with its words); ALTER on the cluster is needed. Without an
authorizer every creation is answered SECURITY_DISABLED, as Kafka's."""
from __future__ import annotations

from commitgate.gateway.acls import NO_AUTHORIZER, check_known
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, AclBinding, creation_error
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 30
VERSIONS = (1, 3)

Response = messages.get("CreateAclsResponse").cls


def _result(error: ErrorCode, message: str | None = None) -> object:
    return Response.AclCreationResult(error_code=error, error_message=message)


async def handle(ctx: RequestContext, request) -> object:
    for i, acl in enumerate(request.creations):
        check_known(f"ACL creation {i} (resource {acl.resource_name!r})",
                    resource_type=acl.resource_type, pattern_type=acl.resource_pattern_type,
                    operation=acl.operation, permission_type=acl.permission_type)
    if not ctx.broker.authorizer.enabled:
        return Response(throttle_time_ms=0, results=[
            _result(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) for _ in request.creations])
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, results=[
            _result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _ in request.creations])
    bindings = [AclBinding(a.resource_type, a.resource_name, a.resource_pattern_type,
                           a.principal, a.host, a.operation, a.permission_type)
                for a in request.creations]
    errors = [creation_error(b) for b in bindings]
    valid = [b for b, error in zip(bindings, errors, strict=True) if error is None]
    if valid:
        ctx.broker.acls.add(valid)
    return Response(throttle_time_ms=0, results=[
        _result(ErrorCode.INVALID_REQUEST, error) if error else _result(ErrorCode.NONE)
        for error in errors])
