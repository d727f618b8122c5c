"""OffsetFetch (key 9): a group's committed offsets (offset, leader epoch, metadata).

Partitions without a committed offset get offset -1 and empty metadata, with no error, as in
Kafka; a null topic list (v2+) asks for every committed offset of the group. v8+ ask for
several groups at once; v10 names topics by id (unknown ids get UNKNOWN_TOPIC_ID).
With ``require_stable`` (v7+), a partition that a transaction still holds an offset for
(TxnOffsetCommit before its EndTxn) gets UNSTABLE_OFFSET_COMMIT and offset -1, as in Kafka:
the client retries until the transaction has ended; without it the committed offset is shown.
"""
from __future__ import annotations

from commitgate.gateway.groups.offsets import OffsetManager
from commitgate.gateway.groups.records import OffsetValue
from commitgate.gateway.groups.topics import topic_id_of, topic_name
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP, TOPIC
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 9
VERSIONS = (1, 10)

Response = messages.get("OffsetFetchResponse").cls
NO_OFFSET = OffsetValue(-1, -1, "", -1)

Row = tuple[str | None, object, list[tuple[int, OffsetValue, ErrorCode]]]  # name, id, partitions


def _rows(ctx: RequestContext, group_id: str, topics, by_id: bool, stable: bool) -> list[Row]:
    broker = ctx.broker
    offsets = broker.groups.offsets

    def partitions(name: str, parts: list[tuple[int, OffsetValue | None]]
                   ) -> list[tuple[int, OffsetValue, ErrorCode]]:
        return [_partition(offsets, group_id, name, p, v, stable) for p, v in parts]
    if topics is None:
        found = offsets.fetch(group_id, None)
        rows = [(name, topic_id_of(broker, name), partitions(name, parts))
                for name, parts in found if ctx.allowed(DESCRIBE, TOPIC, name)]
        return [row for row in rows if row[1] is not None or not by_id]
    rows = []
    for topic in topics:
        topic_id = topic.topic_id if by_id else None  # v10+ only
        name = topic_name(broker, topic.name, topic_id, by_id)
        if name is None:
            rows.append((topic.name, topic_id, [(p, NO_OFFSET, ErrorCode.UNKNOWN_TOPIC_ID)
                                                for p in topic.partition_indexes]))
            continue
        if not ctx.allowed(DESCRIBE, TOPIC, name):
            rows.append((name, topic_id, [(p, NO_OFFSET, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                          for p in topic.partition_indexes]))
            continue
        [(_, parts)] = offsets.fetch(group_id, [(name, list(topic.partition_indexes))])
        rows.append((name, topic_id, partitions(name, parts)))
    return rows


def _partition(offsets: OffsetManager, group_id: str, topic: str, partition: int,
               value: OffsetValue | None, stable: bool) -> tuple[int, OffsetValue, ErrorCode]:
    if stable and offsets.pending(group_id, topic, partition):
        return partition, NO_OFFSET, ErrorCode.UNSTABLE_OFFSET_COMMIT
    return partition, value or NO_OFFSET, ErrorCode.NONE


def _group(ctx: RequestContext, wanted, stable: bool) -> object:
    if not ctx.allowed(DESCRIBE, GROUP, wanted.group_id):
        return Response.OffsetFetchResponseGroup(
            group_id=wanted.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    by_id = ctx.api_version >= 10
    rows = _rows(ctx, wanted.group_id, wanted.topics, by_id, stable)
    return Response.OffsetFetchResponseGroup(
        group_id=wanted.group_id, error_code=ErrorCode.NONE, topics=[
            Response.OffsetFetchResponseTopics(name=name, topic_id=topic_id, partitions=[
                Response.OffsetFetchResponsePartitions(
                    partition_index=p, committed_offset=v.offset,
                    committed_leader_epoch=v.leader_epoch, metadata=v.metadata, error_code=e)
                for p, v, e in parts])
            for name, topic_id, parts in rows])


async def handle(ctx: RequestContext, request) -> object:
    if ctx.api_version >= 8:
        return Response(throttle_time_ms=0, groups=[_group(ctx, g, request.require_stable)
                                                     for g in request.groups])
    if not ctx.allowed(DESCRIBE, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        topics=[])
    rows = _rows(ctx, request.group_id, request.topics, False, request.require_stable)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
        Response.OffsetFetchResponseTopic(name=name, partitions=[
            Response.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=v.offset,
                committed_leader_epoch=v.leader_epoch, metadata=v.metadata, error_code=e)
            for p, v, e in parts])
        for name, _, parts in rows])
