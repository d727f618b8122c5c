"""AlterConfigs (key 33), v0-2: replace the whole config set of a topic or of a dynamic broker
layer (the configs left out go back to their defaults), or only validate it.

Kafka's checks, in Kafka's order (``gateway.config_admin``): a resource named twice, duplicate
keys and null values (INVALID_REQUEST), the resource (broker id, topic name), then the new set:
unknown names and bad values are INVALID_CONFIG with Kafka's messages for topics and
INVALID_REQUEST for brokers; a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
Not implemented: CLIENT_METRICS and GROUP resources.
"""
from __future__ import annotations

from commitgate.gateway import config_admin
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.authorizer import ALTER_CONFIGS
from commitgate.protocol import messages

API_KEY = 33
VERSIONS = (0, 2)

Response = messages.get("AlterConfigsResponse").cls


def _alter(ctx: RequestContext, resource, validate_only: bool) -> config_admin.Problem | None:
    broker = ctx.broker
    rtype, name = resource.resource_type, resource.resource_name
    new = {c.name: c.value for c in resource.configs}
    return (config_admin.authorization_problem(ctx, rtype, name, ALTER_CONFIGS)
            or config_admin.entries_problem([c.name for c in resource.configs],
                                         [c.name for c in resource.configs if c.value is None])
            or config_admin.resource_problem(broker, rtype, name)
            or config_admin.alter(broker, rtype, name, new, validate_only))


async def handle(ctx: RequestContext, request) -> object:
    response = config_admin.respond(Response, request,
                                    lambda r: _alter(ctx, r, request.validate_only))
    await config_admin.save_topic_changes(ctx.broker, request)
    return response
