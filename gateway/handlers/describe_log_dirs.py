"""DescribeLogDirs (key 35), v1-5: the one data directory, with the size of each partition
asked for (null: every partition of every topic).

A partition's size is the bytes of the CommitLog entries holding its batches from its log start
on (``MessageStore.partition_size``: counters, so a request costs a step per partition once
each partition was walked at its first request after a start). The offset lag is 0 (no future
logs), v4+ carries the volume's total and usable bytes, v5+ says it is not cordoned. Topics
and partitions that do not exist are left out, as Kafka does.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from commitgate.gateway.broker import Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 35
VERSIONS = (1, 5)

Response = messages.get("DescribeLogDirsResponse").cls
Result = Response.DescribeLogDirsResult


def log_dir(broker: Broker) -> Path:
    """The one data directory, by the path clients see (AlterReplicaLogDirs takes it back)."""
    return broker.config.store.data_dir.resolve()


def _wanted(broker: Broker, topics) -> dict[str, list[int]]:
    """Partitions to describe per topic, those that exist only."""
    if topics is None:
        return {t.name: list(range(t.partitions)) for t in broker.store.topics()}
    wanted: dict[str, list[int]] = {}
    for topic in topics:
        record = broker.topic(topic.topic)
        if record is not None:
            wanted.setdefault(topic.topic, []).extend(
                p for p in topic.partitions if 0 <= p < record.partitions)
    return {name: sorted(set(parts)) for name, parts in wanted.items() if parts}


async def _topic(broker: Broker, name: str, partitions: list[int]) -> object:
    return Response.DescribeLogDirsTopic(name=name, partitions=[
        Response.DescribeLogDirsPartition(
            partition_index=p, partition_size=await broker.store.partition_size(name, p),
            offset_lag=0, is_future_key=False)
        for p in partitions])


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        results=[])
    data_dir = log_dir(broker)
    usage = shutil.disk_usage(data_dir)
    topics = [await _topic(broker, name, parts)
              for name, parts in _wanted(broker, request.topics).items()]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[
        Result(error_code=ErrorCode.NONE, log_dir=str(data_dir), topics=topics,
               total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False)])
