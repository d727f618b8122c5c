"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT single configs of a
topic or of a dynamic broker layer, or only validate the result.

APPEND and SUBTRACT work on LIST configs only (``cleanup.policy``, the throttled-replica lists),
starting from the default when the config is not set, as Kafka's controller does. The checks
after the operations are AlterConfigs' (``gateway.config_admin``). Broker configs: the cluster
default ("") or this broker's id; the dynamic ones are ``gateway.broker_configs.DYNAMIC``,
anything else is INVALID_REQUEST "Cannot update these configs dynamically".
Not implemented: BROKER_LOGGER (log levels), CLIENT_METRICS and GROUP resources.
"""
from __future__ import annotations

import enum

from commitgate.gateway import config_admin
from commitgate.gateway.config_admin import Problem, ResourceType
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.authorizer import ALTER_CONFIGS
from commitgate.gateway.settings import SETTINGS
from commitgate.gateway.topic_configs import TOPIC_CONFIGS, ConfigType
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 44
VERSIONS = (0, 1)

Response = messages.get("IncrementalAlterConfigsResponse").cls


class OpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _list_op(ctx: RequestContext, rtype: int, configs: dict[str, str], op: OpType, name: str,
             value: str) -> Problem | None:
    """APPEND / SUBTRACT ``value``'s items to / from the LIST config ``name``."""
    spec = TOPIC_CONFIGS.get(name) if rtype == ResourceType.TOPIC else None
    if spec is None or spec.type != ConfigType.LIST:
        if rtype == ResourceType.TOPIC:
            return ErrorCode.INVALID_CONFIG, \
                f"Can't {op.name} to key {name} because its type is not LIST."
        if name not in SETTINGS:  # no broker setting is a LIST
            return ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}"
        return ErrorCode.INVALID_CONFIG, \
            f"Config value {op.name.lower()} is not allowed for config key: {name}"
    old = configs.get(name, spec.default(ctx.broker.config))
    items = [item for item in (old or "").split(",") if item]
    given = value.split(",")
    if op is OpType.APPEND:
        items += [item for item in dict.fromkeys(given) if item not in items]
    else:
        items = [item for item in items if item not in given]
    configs[name] = ",".join(items)
    return None


def _apply(ctx: RequestContext, rtype: int, configs: dict[str, str], entries) -> Problem | None:
    for entry in entries:
        if entry.config_operation not in OpType._value2member_map_:
            return ErrorCode.INVALID_REQUEST, \
                f"Unknown operations type {entry.config_operation}"
        op = OpType(entry.config_operation)
        if op is OpType.SET:
            configs[entry.name] = entry.value
        elif op is OpType.DELETE:
            configs.pop(entry.name, None)
        else:
            problem = _list_op(ctx, rtype, configs, op, entry.name, entry.value)
            if problem:
                return problem
    return None


def _alter(ctx: RequestContext, resource, validate_only: bool) -> Problem | None:
    broker = ctx.broker
    rtype, name = resource.resource_type, resource.resource_name
    entries = resource.configs
    problem = config_admin.authorization_problem(ctx, rtype, name, ALTER_CONFIGS) or \
        config_admin.entries_problem(
        [e.name for e in entries],
        [e.name for e in entries if e.value is None and e.config_operation != OpType.DELETE]) \
        or config_admin.resource_problem(broker, rtype, name)
    if problem:
        return problem
    configs = config_admin.current(broker, rtype, name)
    return _apply(ctx, rtype, configs, entries) or \
        config_admin.alter(broker, rtype, name, configs, validate_only)


async def handle(ctx: RequestContext, request) -> object:
    response = config_admin.respond(Response, request,
                                    lambda r: _alter(ctx, r, request.validate_only))
    await config_admin.save_topic_changes(ctx.broker, request)
    return response
