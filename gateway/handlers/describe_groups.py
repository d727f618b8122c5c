"""DescribeGroups (key 15): state, protocol type, protocol and members of each group.

Members' subscription and assignment are shown only for a Stable group (Kafka's rule). An
unknown group is "Dead" with no error before v6 and GROUP_ID_NOT_FOUND from v6 on. Authorized
operations (v3+), when asked for, are all those Kafka supports on a group (no authorizer), on
every group answered without an error, the "Dead" unknown ones of v3-5 included, as Kafka does.
"""
from __future__ import annotations

from commitgate.gateway.acls import GROUP_OPERATIONS
from commitgate.gateway.groups.group import GroupState
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 15
VERSIONS = (0, 6)

Response = messages.get("DescribeGroupsResponse").cls
Described = Response.DescribedGroup


def _describe(ctx: RequestContext, group_id: str) -> object:
    if not ctx.allowed(DESCRIBE, GROUP, group_id):
        return Described(group_id=group_id, group_state="", protocol_type="", protocol_data="",
                         members=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    group = ctx.broker.groups.describe(group_id)
    if group is None:
        out = Described(group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="",
                        protocol_data="", members=[], error_code=ErrorCode.NONE)
        if ctx.api_version >= 6:
            out.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            out.error_message = f"Group {group_id} not found."
        return out
    stable = group.is_(GroupState.STABLE)
    protocol = group.protocol_name if stable else ""
    return Described(
        error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
        protocol_type=group.protocol_type or "", protocol_data=protocol, members=[
            Response.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"")
            for m in group.members.values()])


async def handle(ctx: RequestContext, request) -> object:
    groups = [_describe(ctx, g) for g in request.groups]
    if ctx.api_version >= 3 and request.include_authorized_operations:
        for group in groups:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = ctx.operations(GROUP, group.group_id,
                                                             GROUP_OPERATIONS)
    return Response(throttle_time_ms=0, groups=groups)
