"""ConsumerGroupHeartbeat (key 68): KIP-848's one request for a consumer group member
(``group.protocol=consumer``): join with epoch 0, heartbeat with the current epoch, acknowledge
revoked partitions by leaving them out of ``TopicPartitions``, leave with -1 (-2: a static
member that will return). The broker assigns partitions (``uniform`` or ``range``); see
gateway/groups/consumer_membership.py. Errors carry Kafka's messages.

v1 (Kafka 4.0): the client makes its member id (KIP-1082), and a member may subscribe with a
topic regular expression (SubscribedTopicRegex, gateway/groups/consumer_regex.py).
"""
from __future__ import annotations

from commitgate.gateway.groups.consumer_membership import HeartbeatRequest
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 68
VERSIONS = (0, 1)

Response = messages.get("ConsumerGroupHeartbeatResponse").cls


def _request(ctx: RequestContext, request) -> HeartbeatRequest:
    owned = None if request.topic_partitions is None else \
        [(t.topic_id, list(t.partitions)) for t in request.topic_partitions]
    return HeartbeatRequest(
        version=ctx.api_version, group_id=request.group_id, member_id=request.member_id,
        epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed=None if request.subscribed_topic_names is None
        else list(request.subscribed_topic_names),
        regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor, owned=owned,
        client_id=ctx.client_id or "", client_host="/" + ctx.peer.rpartition(":")[0])


def _failed(error: ErrorCode, message: str | None) -> object:
    return Response(throttle_time_ms=0, error_code=error, error_message=message, member_id=None,
                    member_epoch=0, heartbeat_interval_ms=0, assignment=None)


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(READ, GROUP, request.group_id):
        return _failed(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    result = await ctx.broker.groups.consumer.heartbeat(_request(ctx, request))
    if result.error:
        return _failed(result.error, result.message)
    assignment = None if result.assignment is None else Response.Assignment(topic_partitions=[
        Response.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
        for topic_id, parts in sorted(result.assignment.items()) if parts])
    return Response(throttle_time_ms=0, error_code=result.error, error_message=None,
                    member_id=result.member_id, member_epoch=result.epoch,
                    heartbeat_interval_ms=ctx.broker.config.consumer_group_heartbeat_interval_ms,
                    assignment=assignment)
