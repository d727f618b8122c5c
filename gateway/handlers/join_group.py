"""JoinGroup (key 11): join a classic group, or rejoin it for the next generation.

The response waits until the join phase ends (every member rejoined, or the rebalance timeout).
v4+: a member without an id first gets MEMBER_ID_REQUIRED and a fresh id to join with (KIP-394);
v5+: static members (``group.instance.id``) rejoin a Stable group without a rebalance; v9+: a
static leader rejoining gets SkipAssignment (KIP-814). v0 has no rebalance timeout: the session
timeout serves as both, as in Kafka.
"""
from __future__ import annotations

from commitgate.gateway.groups.membership import JoinRequest
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 11
VERSIONS = (0, 9)

Response = messages.get("JoinGroupResponse").cls


def _request(ctx: RequestContext, request) -> JoinRequest:
    version = ctx.api_version
    return JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        instance_id=request.group_instance_id if version >= 5 else None,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1
        else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        client_id=ctx.client_id or "", client_host="/" + ctx.peer.rpartition(":")[0],
        require_known_member_id=version >= 4, skip_assignment_supported=version >= 9)


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(READ, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        generation_id=-1, protocol_type=None, protocol_name=None, leader="",
                        member_id=request.member_id, members=[])
    result = await ctx.broker.groups.membership.join(_request(ctx, request))
    protocol = result.protocol_name
    if ctx.api_version < 7:
        protocol = protocol or ""  # not nullable before v7
    members = [Response.JoinGroupResponseMember(member_id=m.member_id,
                                                group_instance_id=m.instance_id,
                                                metadata=m.metadata(protocol or ""))
               for m in result.members]
    return Response(throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
                    protocol_type=result.protocol_type, protocol_name=protocol,
                    leader=result.leader, skip_assignment=result.skip_assignment,
                    member_id=result.member_id, members=members)
