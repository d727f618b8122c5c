"""ListPartitionReassignments (key 46), v0: no reassignment is ever in progress on one broker,
so the list is empty, whatever topics are asked for (Kafka's controller leaves out topics that
do not exist and partitions not being reassigned)."""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 46
VERSIONS = (0, 0)

Response = messages.get("ListPartitionReassignmentsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    error = ErrorCode.NONE if ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME) else \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return Response(throttle_time_ms=0, error_code=error, error_message=None, topics=[])
