"""LeaveGroup (key 13): members leave (the group rebalances without them).

v0-2 name one member; v3+ a batch, each with its own error (an empty member id with a
``group.instance.id`` removes that static member, as Kafka's admin client does). Before v3 the
one member's error is the response's error.
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 13
VERSIONS = (0, 5)

Response = messages.get("LeaveGroupResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(READ, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        members=[])
    batched = ctx.api_version >= 3
    leaving = [(m.member_id, m.group_instance_id) for m in request.members] if batched \
        else [(request.member_id, None)]
    error, errors = ctx.broker.groups.membership.leave(request.group_id, leaving)
    if not batched:
        first = next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)
        return Response(throttle_time_ms=0, error_code=error or first)
    return Response(throttle_time_ms=0, error_code=error, members=[
        Response.MemberResponse(member_id=member_id, group_instance_id=instance_id,
                                error_code=member_error)
        for (member_id, instance_id), member_error in zip(leaving, errors)])
