"""AlterPartitionReassignments (key 45), v0-1: the one broker is every partition's only replica,
so the one reassignment that validates is to ``[this broker]``, which changes nothing.

The answers are Kafka's controller's (ReplicationControlManager.alterPartitionReassignment), per
partition: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION, an empty replica list, a
broker that is not registered or one named twice INVALID_REPLICA_ASSIGNMENT, a cancellation
(null replicas) NO_REASSIGNMENT_IN_PROGRESS since none ever is. v1's
AllowReplicationFactorChange is echoed; with one broker no valid target changes the factor.
"""
from __future__ import annotations

from commitgate.gateway.broker import Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 45
VERSIONS = (0, 1)

Response = messages.get("AlterPartitionReassignmentsResponse").cls


def _assignment_error(broker: Broker, replicas: list[int]) -> str | None:
    """Kafka's validateManualPartitionAssignment, in its order (broker ids sorted)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    registered = {node.node_id for node in broker.nodes()}
    previous = None
    for node in sorted(replicas):
        if node not in registered:
            return (f"The manual partition assignment includes broker {node}, but no such "
                    f"broker is registered.")
        if node == previous:
            return f"The manual partition assignment includes the broker {node} more than once."
        previous = node
    return None


def _partition(broker: Broker, topic: str, target) -> object:
    index = target.partition_index
    record = broker.topic(topic)
    code, message = ErrorCode.NONE, None
    if record is None:
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    elif not 0 <= index < record.partitions:
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        message = f"Unable to find partition {topic}:{index}."
    elif target.replicas is None:
        code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS  # Kafka's default text: no message
    else:
        message = _assignment_error(broker, target.replicas)
        code = ErrorCode.NONE if message is None else ErrorCode.INVALID_REPLICA_ASSIGNMENT
    return Response.ReassignablePartitionResponse(partition_index=index, error_code=code,
                                                  error_message=message)


async def handle(ctx: RequestContext, request) -> object:
    allow = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, allow_replication_factor_change=allow,
                        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=None, responses=[])
    return Response(
        throttle_time_ms=0, allow_replication_factor_change=allow, error_code=ErrorCode.NONE,
        error_message=None, responses=[
            Response.ReassignableTopicResponse(name=t.name, partitions=[
                _partition(ctx.broker, t.name, p) for p in t.partitions])
            for t in request.topics])
