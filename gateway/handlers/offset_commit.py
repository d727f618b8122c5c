"""OffsetCommit (key 8): store committed offsets of a group, durably, before answering.

Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id in v10);
metadata longer than ``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE; the group's
checks (generation, member, static member, rebalance state) are Kafka's, including simple
commits with generation -1 and no member id, which create an Empty group. v2-4 may set a
retention time; v6+ carry the leader epoch; v7+ the group.instance.id.
"""
from __future__ import annotations

from commitgate.gateway.groups.offsets import Commit, CommitRequest
from commitgate.gateway.groups.topics import partition_error, topic_name
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP, TOPIC
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 8
VERSIONS = (2, 10)

Response = messages.get("OffsetCommitResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    broker, version = ctx.broker, ctx.api_version
    by_id = version >= 10
    errors: list[list[ErrorCode]] = []  # per topic, per partition
    commits: list[Commit] = []
    places: list[tuple[int, int]] = []  # where each commit's error goes
    group_ok = ctx.allowed(READ, GROUP, request.group_id)
    for ti, topic in enumerate(request.topics):
        name = topic_name(broker, topic.name, topic.topic_id, by_id)
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED if not group_ok else \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED \
            if not ctx.allowed(READ, TOPIC, name or topic.name or "") else None
        errors.append([denied or partition_error(broker, name, p.partition_index, by_id)
                       for p in topic.partitions])
        for pi, p in enumerate(topic.partitions):
            if errors[ti][pi] is ErrorCode.NONE:
                commits.append(Commit(name, p.partition_index, p.committed_offset,
                                      p.committed_leader_epoch if version >= 6 else -1,
                                      p.committed_metadata))
                places.append((ti, pi))
    if commits:
        results = await broker.groups.offsets.commit(CommitRequest(
            request.group_id, request.generation_id_or_member_epoch, request.member_id,
            request.group_instance_id if version >= 7 else None,
            request.retention_time_ms if version <= 4 else -1, commits, version))
        for (ti, pi), error in zip(places, results):
            errors[ti][pi] = error
    return Response(throttle_time_ms=0, topics=[
        Response.OffsetCommitResponseTopic(name=topic.name, topic_id=topic.topic_id, partitions=[
            Response.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                   error_code=error)
            for p, error in zip(topic.partitions, row)])
        for topic, row in zip(request.topics, errors)])
