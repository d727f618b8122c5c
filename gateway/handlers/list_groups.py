"""ListGroups (key 16): every group, with its state (v4+) and type (v5+).

v4+ filter by state, v5+ by type ("classic" or "consumer" for KIP-848 groups), both matched
without regard to case.
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, GROUP
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 16
VERSIONS = (0, 5)

Response = messages.get("ListGroupsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    states = request.states_filter if ctx.api_version >= 4 else []
    types = request.types_filter if ctx.api_version >= 5 else []
    everything = ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME)  # else the groups it may see
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        Response.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                             group_state=g.state, group_type=g.type)
        for g in ctx.broker.groups.list(states, types)
        if everything or ctx.allowed(DESCRIBE, GROUP, g.group_id)])
