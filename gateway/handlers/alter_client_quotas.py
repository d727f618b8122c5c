"""AlterClientQuotas (key 49): set or remove quota keys of user / client-id / ip entities, with
Kafka's validation (ClientQuotaControlManager); valid entities are applied and kept durably
together, each entity answered on its own."""
from __future__ import annotations

from commitgate.gateway.quotas.store import Alteration, QuotaError, entity_of
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import ALTER_CONFIGS
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 49
VERSIONS = (0, 1)

Response = messages.get("AlterClientQuotasResponse").cls


def _alteration(entry) -> Alteration:
    return Alteration(entity_of((e.entity_type, e.entity_name) for e in entry.entity),
                      [(op.key, None if op.remove else op.value) for op in entry.ops])


async def handle(ctx: RequestContext, request) -> object:
    alterations = [_alteration(entry) for entry in request.entries]
    if not ctx.allowed(ALTER_CONFIGS, CLUSTER, CLUSTER_NAME):
        results = {a.entity: QuotaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                   for a in alterations}
    else:
        results = ctx.broker.quotas.store.alter(alterations, request.validate_only)
    entries = [Response.EntryData(
        error_code=ErrorCode.NONE if error is None else error.code,
        error_message=None if error is None else error.message,
        entity=[Response.EntityData(entity_type=kind, entity_name=name)
                for kind, name in entity])
        for entity, error in results.items()]
    return Response(throttle_time_ms=0, entries=entries)
