"""DescribeCluster (key 60), v0-2: the cluster id, the controller and the brokers, as a Kafka
broker answers it (AuthHelper.computeDescribeClusterResponse).

Only the broker endpoint type (1) is served: 2 (controllers) is MISMATCHED_ENDPOINT_TYPE and any
other value UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST for both in v0). The controller id is
this broker's, as a KRaft broker answers with a live broker. No broker is ever fenced. With no
authorizer every cluster operation is allowed, so the authorized operations, when asked for,
are all the operations Kafka defines on a cluster.
"""
from __future__ import annotations

from commitgate.gateway.acls import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 60
VERSIONS = (0, 2)
BROKERS, CONTROLLERS = 1, 2
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115

Response = messages.get("DescribeClusterResponse").cls


def _endpoint_error(ctx: RequestContext, endpoint_type: int) -> object | None:
    if endpoint_type == BROKERS:
        return None
    v0 = ctx.api_version == 0
    if endpoint_type == CONTROLLERS:
        code = ErrorCode.INVALID_REQUEST if v0 else MISMATCHED_ENDPOINT_TYPE
        message = ("The request was sent to an endpoint of type BROKER, but we wanted an "
                   "endpoint of type CONTROLLER")
    else:
        code = ErrorCode.INVALID_REQUEST if v0 else UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {endpoint_type}"
    return Response(throttle_time_ms=0, error_code=code, error_message=message, cluster_id="",
                    brokers=[])


async def handle(ctx: RequestContext, request) -> object:
    refused = _endpoint_error(ctx, request.endpoint_type if ctx.api_version >= 1 else BROKERS)
    if refused is not None:
        return refused
    broker = ctx.broker
    brokers = [Response.DescribeClusterBroker(broker_id=n.node_id, host=n.endpoint(ctx.listener).host,
                                              port=n.endpoint(ctx.listener).port, rack=n.rack,
                                              is_fenced=False)
               for n in broker.nodes()]
    operations = ctx.operations(CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS) \
        if request.include_cluster_authorized_operations else OPERATIONS_NOT_REQUESTED
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                    endpoint_type=BROKERS, cluster_id=broker.cluster_id,
                    controller_id=broker.node.node_id, brokers=brokers,
                    cluster_authorized_operations=operations)
