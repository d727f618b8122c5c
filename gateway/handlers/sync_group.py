"""SyncGroup (key 14): the leader hands over the assignment; every member gets its own.

A follower's SyncGroup waits until the leader's assignment is stored in
``__consumer_offsets``. v5+ carry the protocol type and name, checked against the group's
(INCONSISTENT_GROUP_PROTOCOL) and echoed back.
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 14
VERSIONS = (0, 5)

Response = messages.get("SyncGroupResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(READ, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        protocol_type=None, protocol_name=None, assignment=b"")
    v5 = ctx.api_version >= 5
    result = await ctx.broker.groups.membership.sync(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.protocol_type if v5 else None, request.protocol_name if v5 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments})
    return Response(throttle_time_ms=0, error_code=result.error,
                    protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                    assignment=result.assignment)
