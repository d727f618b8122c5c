"""ElectLeaders (key 43), v0-2: ELECTION_NOT_NEEDED, as Kafka's controller answers (Replication-
ControlManager.electLeaders) when every partition already has its preferred leader.

One broker is every partition's only replica and leader, so a preferred (0) or unclean (1)
election is never needed. A null partition list asks for every partition, and Kafka then leaves
out the partitions whose election is not needed: each topic comes back with an empty list. An
unknown election type is INVALID_REQUEST for the whole request.
"""
from __future__ import annotations

from commitgate.gateway.broker import Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 43
VERSIONS = (0, 2)
ELECTION_TYPES = (0, 1)  # PREFERRED, UNCLEAN
NOT_NEEDED = "Leader election not needed for topic partition."

Response = messages.get("ElectLeadersResponse").cls
Result = Response.ReplicaElectionResult
PartitionResult = Response.PartitionResult


def _partition(broker: Broker, topic: str, partition: int) -> object:
    record = broker.topic(topic)
    if record is None:
        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif not 0 <= partition < record.partitions:
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        message = f"No such partition as {topic}-{partition}"
    else:
        code, message = ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
    return PartitionResult(partition_id=partition, error_code=code, error_message=message)


def _refused(request, message: str) -> object:
    """Kafka's error response: the error on the whole request and on every partition named."""
    return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                    replica_election_results=[
                        Result(topic=t.topic, partition_result=[
                            PartitionResult(partition_id=p, error_code=ErrorCode.INVALID_REQUEST,
                                            error_message=message) for p in t.partitions])
                        for t in request.topic_partitions or ()])


async def handle(ctx: RequestContext, request) -> object:
    wanted = request.topic_partitions
    if wanted is not None and not wanted:
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        replica_election_results=[])
    election_type = request.election_type if ctx.api_version >= 1 else 0
    if election_type not in ELECTION_TYPES:
        return _refused(request, f"Unknown election type {election_type}")
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        replica_election_results=[])
    broker = ctx.broker
    if wanted is None:
        results = [Result(topic=t.name, partition_result=[]) for t in broker.store.topics()]
    else:
        results = [Result(topic=t.topic, partition_result=[_partition(broker, t.topic, p)
                                                           for p in t.partitions])
                   for t in wanted]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                    replica_election_results=results)
