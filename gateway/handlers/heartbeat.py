"""Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

v3+ carry ``group.instance.id`` (a stale static member gets FENCED_INSTANCE_ID).
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 12
VERSIONS = (0, 4)

Response = messages.get("HeartbeatResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(READ, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.membership.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None)
    return Response(throttle_time_ms=0, error_code=error)
