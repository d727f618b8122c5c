"""Metadata (key 3): brokers, the cluster id and the partitions of the topics asked for.

Unknown topics are auto-created when the request and ``auto.create.topics.enable`` allow it;
v10+ requests may name topics by id (@platformatic/kafka does). Authorized operations (v8+), when
asked for, are those the principal may perform (all Kafka supports on the resource type without
an authorizer): on every topic named or listed (not on an unknown topic id), and on the cluster in
v8-10 only (v11 moved it to DescribeCluster). With the authorizer on, a listing leaves out the
topics the principal may not DESCRIBE, a topic asked for by name is TOPIC_AUTHORIZATION_FAILED,
and auto-creation needs CREATE on the cluster or the topic.
"""
from __future__ import annotations

import logging
import uuid

from commitgate.engine.topic_table import TopicRecord
from commitgate.gateway.acls import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED, TOPIC_OPERATIONS
from commitgate.gateway.broker import LEADER_EPOCH, Broker
from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, TOPIC
from commitgate.gateway.security.authorizer import CREATE, DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 3
VERSIONS = (0, 13)

Response = messages.get("MetadataResponse").cls
TopicOut = Response.MetadataResponseTopic
PartitionOut = Response.MetadataResponsePartition


def _partitions(broker: Broker, topic: TopicRecord) -> list:
    node = broker.node.node_id
    return [PartitionOut(error_code=ErrorCode.NONE, partition_index=p,
                         leader_id=broker.leader_of(topic.name, p), leader_epoch=LEADER_EPOCH,
                         replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
            for p in range(topic.partitions)]


def _topic(broker: Broker, topic: TopicRecord) -> object:
    return TopicOut(error_code=ErrorCode.NONE, name=topic.name,
                    topic_id=uuid.UUID(topic.topic_id), is_internal=is_internal(topic.name),
                    partitions=_partitions(broker, topic))


async def _requested(ctx: RequestContext, wanted, allow_create: bool) -> object:
    broker = ctx.broker
    if wanted.name is None or (wanted.topic_id is not None and wanted.topic_id.int):
        # by id (v10+; kafka-clients 4 send an empty name with the id)
        found = broker.topic_by_id(wanted.topic_id)
        if found is None or not ctx.allowed(DESCRIBE, TOPIC, found.name):
            return TopicOut(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                            topic_id=wanted.topic_id)
        return _topic(broker, found)
    if not ctx.allowed(DESCRIBE, TOPIC, wanted.name):
        return TopicOut(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name)
    found = broker.topic(wanted.name)
    if found is None and allow_create and not (ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME) or
                                               ctx.allowed(CREATE, TOPIC, wanted.name)):
        return TopicOut(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name)
    if found is None and allow_create:
        error = await broker.auto_create(wanted.name)
        if error is ErrorCode.NONE:
            log.info("auto-created topic %s for %s", wanted.name, ctx.who())
            found = broker.topic(wanted.name)
        else:
            return TopicOut(error_code=error, name=wanted.name)
    if found is None:
        return TopicOut(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=wanted.name)
    return _topic(broker, found)


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    node = broker.node
    endpoint = node.endpoint(ctx.listener)
    # v0: an empty list means all topics; v1+: null means all, empty means none
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = [_topic(broker, t) for t in broker.store.topics()
                  if ctx.allowed(DESCRIBE, TOPIC, t.name)]
    else:
        allow = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
        topics = [await _requested(ctx, wanted, allow) for wanted in request.topics]
    if ctx.api_version >= 8 and request.include_topic_authorized_operations:
        for topic in topics:
            if topic.name is not None and topic.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                topic.topic_authorized_operations = ctx.operations(TOPIC, topic.name,
                                                                   TOPIC_OPERATIONS)
    asked = 8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations
    return Response(
        throttle_time_ms=0,
        brokers=[Response.MetadataResponseBroker(node_id=node.node_id, host=endpoint.host,
                                                 port=endpoint.port, rack=node.rack)],
        cluster_id=broker.cluster_id, controller_id=node.node_id, topics=topics,
        cluster_authorized_operations=ctx.operations(CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
        if asked else OPERATIONS_NOT_REQUESTED,
        error_code=ErrorCode.NONE)
