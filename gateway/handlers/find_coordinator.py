"""FindCoordinator (key 10): this broker coordinates every group and every transactional id.

v0-3 ask for one key; v4+ batch several (``coordinator_keys``), answered one by one. Key type 0
is a group, 1 a transactional id; others get INVALID_REQUEST. A group key creates the
``__consumer_offsets`` topic on first use, as Kafka does; if that fails the answer is
COORDINATOR_NOT_AVAILABLE. With the authorizer on, a key needs DESCRIBE on its group or
transactional id (else GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from commitgate.engine import StoreStatus
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security import acl_store
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 10
VERSIONS = (0, 6)
GROUP, TRANSACTION = 0, 1

Response = messages.get("FindCoordinatorResponse").cls


def _error(ctx: RequestContext, key_type: int) -> ErrorCode:
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.INVALID_REQUEST
    if key_type == GROUP and ctx.broker.groups.topic.ensure() is not StoreStatus.OK:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE


DENIED = {GROUP: (acl_store.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
          TRANSACTION: (acl_store.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}


def _coordinator(ctx: RequestContext, key: str, error: ErrorCode, key_type: int) -> object:
    node = ctx.broker.node
    if error is ErrorCode.NONE:
        resource, denied = DENIED[key_type]
        if not ctx.allowed(DESCRIBE, resource, key):
            error = denied
    if error is not ErrorCode.NONE:
        return Response.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                                    error_message=error.name)
    endpoint = node.endpoint(ctx.listener)
    return Response.Coordinator(key=key, node_id=node.node_id, host=endpoint.host,
                                port=endpoint.port, error_code=ErrorCode.NONE)


async def handle(ctx: RequestContext, request) -> object:
    error = _error(ctx, request.key_type)
    if ctx.api_version >= 4:
        return Response(throttle_time_ms=0, coordinators=[
            _coordinator(ctx, key, error, request.key_type) for key in request.coordinator_keys])
    one = _coordinator(ctx, request.key, error, request.key_type)
    return Response(throttle_time_ms=0, error_code=one.error_code, error_message=one.error_message,
                    node_id=one.node_id, host=one.host, port=one.port)
