"""DescribeClientQuotas (key 48): the quota entities a filter matches, as Kafka's
ClientQuotasImage.describe (exact, default and any-name components, strict or not)."""
from __future__ import annotations

from commitgate.gateway.quotas.store import QuotaError
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import CLUSTER_DENIED, DESCRIBE_CONFIGS
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 48
VERSIONS = (0, 1)

Response = messages.get("DescribeClientQuotasResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_DENIED, entries=None)
    try:
        found = ctx.broker.quotas.store.describe(request.components, request.strict)
    except QuotaError as exc:  # Kafka's error response has no entries
        return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message,
                        entries=None)
    entries = [Response.EntryData(
        entity=[Response.EntityData(entity_type=kind, entity_name=name)
                for kind, name in entity],
        values=[Response.ValueData(key=key, value=value)
                for key, value in sorted(quotas.items())])
        for entity, quotas in found]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                    entries=entries)
