"""DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions, paged.

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache answer: topics sorted by
name from the cursor's on (an empty list asks for every topic, and then unknown names are not
reported), the cursor's topic from its partition, at most min(ResponsePartitionLimit, 2000)
partitions (at least 1); where the limit stops the answer NextCursor names the next partition
(or the next topic from partition 0). A cursor whose topic is not among the topics asked for, or
with a negative partition, is INVALID_REQUEST on every topic asked for. The one broker leads
every partition at epoch 0 with itself as the only replica; no ELR. Without an authorizer every
topic operation is authorized.
"""
from __future__ import annotations

import uuid

from commitgate.engine.topic_table import TopicRecord, topic_name_error
from commitgate.gateway.acls import TOPIC_OPERATIONS
from commitgate.gateway.broker import LEADER_EPOCH, Broker
from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 75
VERSIONS = (0, 0)
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default

Response = messages.get("DescribeTopicPartitionsResponse").cls
TopicOut = Response.DescribeTopicPartitionsResponseTopic
PartitionOut = Response.DescribeTopicPartitionsResponsePartition


def _partitions(broker: Broker, topic: TopicRecord, start: int, limit: int) -> list:
    node = broker.node.node_id
    return [PartitionOut(error_code=ErrorCode.NONE, partition_index=p,
                         leader_id=broker.leader_of(topic.name, p), leader_epoch=LEADER_EPOCH,
                         replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[],
                         last_known_elr=[], offline_replicas=[])
            for p in range(start, min(topic.partitions, start + limit))]


def _unknown(name: str) -> object:
    code = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return TopicOut(error_code=code, name=name, is_internal=is_internal(name), partitions=[],
                    topic_authorized_operations=TOPIC_OPERATIONS)


def _refused(request) -> object:
    """Kafka's error response: the code on every topic asked for (it carries no message)."""
    return Response(throttle_time_ms=0, next_cursor=None, topics=[
        TopicOut(error_code=ErrorCode.INVALID_REQUEST, name=t.name, is_internal=False,
                 partitions=[]) for t in request.topics])


def _names(broker: Broker, request, after: str) -> list[str]:
    asked = [t.name for t in request.topics] if request.topics else \
        [t.name for t in broker.store.topics()]
    return sorted({name for name in asked if name >= after})


def _page(ctx: RequestContext, names: list[str], cursor, limit: int, all_topics: bool
          ) -> object:
    """A page of topics: a listing leaves out those the principal may not describe, a topic
    asked for by name is TOPIC_AUTHORIZATION_FAILED."""
    broker = ctx.broker
    topics, next_cursor, remaining = [], None, limit
    for name in names:
        if remaining == 0:  # the previous topic ended the page exactly
            next_cursor = Response.Cursor(topic_name=name, partition_index=0)
            break
        if not ctx.allowed(DESCRIBE, TOPIC, name):
            if not all_topics:
                topics.append(TopicOut(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       name=name, is_internal=False, partitions=[]))
            continue
        record = broker.topic(name)
        if record is None:
            if not all_topics:
                topics.append(_unknown(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions = _partitions(broker, record, start, remaining)
        topics.append(TopicOut(error_code=ErrorCode.NONE, name=name,
                               topic_id=uuid.UUID(record.topic_id), is_internal=is_internal(name),
                               partitions=partitions,
                               topic_authorized_operations=ctx.operations(TOPIC, name,
                                                                          TOPIC_OPERATIONS)))
        end = start + len(partitions)
        if end < record.partitions:
            next_cursor = Response.Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


async def handle(ctx: RequestContext, request) -> object:
    cursor = request.cursor
    names = _names(ctx.broker, request, cursor.topic_name if cursor is not None else "")
    if cursor is not None and (cursor.partition_index < 0 or
                               request.topics and cursor.topic_name not in names):
        return _refused(request)
    limit = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    return _page(ctx, names, cursor, limit, not request.topics)
