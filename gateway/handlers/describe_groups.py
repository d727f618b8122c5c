"""DescribeGroups (key 15): state, protocol type, protocol and members of each group.

Members' subscription and assignment are shown only for a Stable group (Kafka's rule). An
unknown group is "Dead" with no error before v6 and GROUP_ID_NOT_FOUND from v6 on. Authorized
operations are not computed (no ACLs): always "unknown".
"""
from __future__ import annotations

from gateway.groups.group import GroupState
from gateway.request_context import RequestContext
from protocol import messages
from protocol.errors import ErrorCode

API_KEY = 15
VERSIONS = (0, 6)
AUTHORIZED_OPERATIONS_UNKNOWN = -2147483648

Response = messages.get("DescribeGroupsResponse").cls
Described = Response.DescribedGroup


def _describe(ctx: RequestContext, group_id: str) -> object:
    group = ctx.broker.groups.describe(group_id)
    if group is None:
        out = Described(group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="",
                        protocol_data="", members=[], error_code=ErrorCode.NONE,
                        authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN)
        if ctx.api_version >= 6:
            out.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            out.error_message = f"Group {group_id} not found."
        return out
    stable = group.is_(GroupState.STABLE)
    protocol = group.protocol_name if stable else ""
    return Described(
        error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
        protocol_type=group.protocol_type or "", protocol_data=protocol,
        authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN, members=[
            Response.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"")
            for m in group.members.values()])


async def handle(ctx: RequestContext, request) -> object:
    return Response(throttle_time_ms=0, groups=[_describe(ctx, g) for g in request.groups])
