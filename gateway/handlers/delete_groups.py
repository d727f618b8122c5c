"""DeleteGroups (key 42): delete Empty groups with their committed offsets.

Unknown groups get GROUP_ID_NOT_FOUND, groups with members NON_EMPTY_GROUP; the deletion is
written to ``__consumer_offsets`` (tombstones) before it is answered.
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import DELETE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 42
VERSIONS = (0, 2)

Response = messages.get("DeleteGroupsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    results = []
    for group_id in request.groups_names:
        error = await ctx.broker.groups.delete_group(group_id) \
            if ctx.allowed(DELETE, GROUP, group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED
        results.append(Response.DeletableGroupResult(group_id=group_id, error_code=error))
    return Response(throttle_time_ms=0, results=results)
