"""OffsetDelete (key 47): delete a group's committed offsets of some partitions.

Unknown groups get GROUP_ID_NOT_FOUND; a group with members NON_EMPTY_GROUP unless it is a
"consumer" group, whose offsets of topics a member subscribes to get
GROUP_SUBSCRIBED_TO_TOPIC; partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION.
"""
from __future__ import annotations

from commitgate.gateway.groups.topics import partition_error
from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 47
VERSIONS = (0, 0)

Response = messages.get("OffsetDeleteResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    known = [(t.name, [p.partition_index for p in t.partitions
                       if partition_error(broker, t.name, p.partition_index, False) is
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
                error_code=ok.get(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            for p in topic.partitions]))
    return Response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)
