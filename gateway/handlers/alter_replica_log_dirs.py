"""AlterReplicaLogDirs (key 34), v1-2: move replicas to another log directory.

There is one log directory (the data directory, as DescribeLogDirs names it), and every replica
is in it already, so a valid move changes nothing and succeeds, as in Kafka when the replica's
directory is the one asked for. The checks are Kafka's (ReplicaManager.alterReplicaLogDirs), in
its order: a topic name too long for the future log's directory name is INVALID_TOPIC_EXCEPTION,
a path other than the log directory LOG_DIR_NOT_FOUND, a partition that does not exist
UNKNOWN_TOPIC_OR_PARTITION. A partition named twice takes the last path given, as Kafka's map
does.
"""
from __future__ import annotations

from commitgate.gateway.broker import Broker
from commitgate.gateway.handlers.describe_log_dirs import log_dir
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 34
VERSIONS = (1, 2)
MAX_DIR_NAME = 255
FUTURE_SUFFIX_LENGTH = 1 + 32 + len("-future")  # ".<uuid hex>-future" after "<topic>-<p>"

Response = messages.get("AlterReplicaLogDirsResponse").cls
TopicResult = Response.AlterReplicaLogDirTopicResult


def _error(broker: Broker, topic: str, partition: int, path: str) -> ErrorCode:
    if len(f"{topic}-{partition}") + FUTURE_SUFFIX_LENGTH > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if path != str(log_dir(broker)):
        return ErrorCode.LOG_DIR_NOT_FOUND
    record = broker.topic(topic)
    if record is None or not 0 <= partition < record.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


async def handle(ctx: RequestContext, request) -> object:
    moves: dict[tuple[str, int], str] = {}
    for directory in request.dirs:
        for topic in directory.topics:
            for partition in topic.partitions:
                moves[topic.name, partition] = directory.path
    results: dict[str, list] = {}
    allowed = ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME)
    for (topic, partition), path in moves.items():
        error = _error(ctx.broker, topic, partition, path) if allowed else \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results.setdefault(topic, []).append(Response.AlterReplicaLogDirPartitionResult(
            partition_index=partition, error_code=error))
    return Response(throttle_time_ms=0, results=[
        TopicResult(topic_name=topic, partitions=partitions)
        for topic, partitions in results.items()])
