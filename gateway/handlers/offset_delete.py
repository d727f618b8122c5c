"""OffsetDelete (key 47): delete a group's committed offsets of some partitions.

Unknown groups get GROUP_ID_NOT_FOUND; a group with members NON_EMPTY_GROUP unless it is a
"consumer" group, whose offsets of topics a member subscribes to get
GROUP_SUBSCRIBED_TO_TOPIC; partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION.
"""
from __future__ import annotations

from commitgate.gateway.groups.topics import partition_error
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP, TOPIC
from commitgate.gateway.security.authorizer import DELETE, READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 47
VERSIONS = (0, 0)

Response = messages.get("OffsetDeleteResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    if not ctx.allowed(DELETE, GROUP, request.group_id):
        return Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0,
                        topics=[])
    readable = {t.name for t in request.topics if ctx.allowed(READ, TOPIC, t.name)}
    known = [(t.name, [p.partition_index for p in t.partitions
                       if t.name in readable and
                       partition_error(broker, t.name, p.partition_index, False) is
                       ErrorCode.NONE]) for t in request.topics]
    error, results = await broker.groups.offsets.delete(request.group_id, known)
    if error is not ErrorCode.NONE:
        return Response(error_code=error, throttle_time_ms=0, topics=[])
    topics = []
    for topic, (_, partitions), errors in zip(request.topics, known, results):
        ok = dict(zip(partitions, errors))
        topics.append(Response.OffsetDeleteResponseTopic(name=topic.name, partitions=[
            Response.OffsetDeleteResponsePartition(
                partition_index=p.partition_index,
                error_code=ok.get(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                  if topic.name in readable else
                                  ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            for p in topic.partitions]))
    return Response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)
