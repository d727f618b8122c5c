"""ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets.

A lookup by timestamp finds its batch on the event loop by a binary search over the
ConsumeQueue units (no batch is read on the way) and decodes that one batch, which may be
compressed and hold many records, in a thread (``MessageStore.timestamp_searches``; a batch
after it only when the log start lies in it with no record past the start qualifying).
"""
from __future__ import annotations

import asyncio

from commitgate.engine.topic_table import TopicRecord
from commitgate.gateway.broker import LEADER_EPOCH, Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 2
VERSIONS = (1, 10)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # v7+
EARLIEST_LOCAL = -4  # v8+ (tiered storage: the local log is the whole log here)
LATEST_TIERED = -5  # v9+ (no tiered storage: nothing is tiered)
EARLIEST_PENDING_UPLOAD = -6  # v11+, not served
READ_COMMITTED = 1

Response = messages.get("ListOffsetsResponse").cls
TopicOut = Response.ListOffsetsTopicResponse
PartitionOut = Response.ListOffsetsPartitionResponse


async def _lookup(broker: Broker, topic: TopicRecord, partition: int, timestamp: int,
                  committed: bool) -> tuple[int, int]:
    """(offset, timestamp) for one query; -1, -1 when no record qualifies. Latest is the
    last stable offset for read_committed."""
    store = broker.store
    if timestamp == LATEST:
        if committed:
            return broker.last_stable_offset(topic, partition), -1
        return store.log_end_offset(topic.name, partition), -1
    topic = topic.name
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return store.log_start_offset(topic, partition), -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    searches = [store.max_timestamp_search(topic, partition)] if timestamp == MAX_TIMESTAMP \
        else store.timestamp_searches(topic, partition, timestamp)
    for search in searches:
        found = await asyncio.to_thread(search.run)
        if found is not None:
            return found
    return -1, -1


async def _partition(ctx: RequestContext, name: str, part, committed: bool) -> object:
    broker = ctx.broker
    out = PartitionOut(partition_index=part.partition_index, timestamp=-1, offset=-1,
                       leader_epoch=-1)
    if not ctx.allowed(DESCRIBE, TOPIC, name):
        out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return out
    topic = broker.topic(name)
    if topic is None or not 0 <= part.partition_index < topic.partitions:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    if part.timestamp <= EARLIEST_PENDING_UPLOAD:
        out.error_code = ErrorCode.UNSUPPORTED_VERSION
        return out
    out.offset, out.timestamp = await _lookup(broker, topic, part.partition_index,
                                              part.timestamp, committed)
    out.leader_epoch = LEADER_EPOCH
    return out


async def handle(ctx: RequestContext, request) -> object:
    committed = request.isolation_level == READ_COMMITTED  # v2+; v1 reads uncommitted
    topics = [TopicOut(name=t.name, partitions=[await _partition(ctx, t.name, p, committed)
                                                for p in t.partitions])
              for t in request.topics]
    return Response(throttle_time_ms=0, topics=topics)
