"""DescribeConfigs (key 32), v1-4: topic and broker configs, as Kafka's ConfigHelper.

TOPIC: every topic config of ``gateway.topic_configs``; the source is the head of the synonym
chain (the topic's own value, then the broker config it defaults to, layer by layer, from that
config's own name on: retention.ms shows no synonym while only log.retention.hours is set).
BROKER "<node id>": every broker setting, read-only unless dynamic; BROKER "": the cluster-wide
dynamic layer only, which always holds min.insync.replicas (KIP-966: Kafka 4.1+, ELR on).
``configuration_keys`` (null or empty: all) picks configs, unknown keys are left out. v1+
synonyms when ``include_synonyms``; v3+ config types, and documentation when
``include_documentation``. Not implemented: BROKER_LOGGER, CLIENT_METRICS and GROUP resources
(INVALID_REQUEST "Unsupported resource type").
"""
from __future__ import annotations

from commitgate.engine.topic_table import topic_name_error
from commitgate.gateway import broker_configs, config_admin
from commitgate.gateway.broker import Broker
from commitgate.gateway.broker_configs import ConfigSource, Synonym
from commitgate.gateway.config_admin import ResourceType
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.authorizer import DESCRIBE_CONFIGS
from commitgate.gateway.settings import SETTINGS
from commitgate.gateway.topic_configs import TOPIC_CONFIGS, ConfigType, effective
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 32
VERSIONS = (1, 4)

Response = messages.get("DescribeConfigsResponse").cls
Result = Response.DescribeConfigsResult
Entry = Response.DescribeConfigsResourceResult


class Options:
    """What the request asks to include, for every resource."""

    def __init__(self, request) -> None:
        self.synonyms = request.include_synonyms
        self.documentation = request.include_documentation


def _entry(name: str, value: str | None, chain: list[Synonym], read_only: bool, kind: int,
           doc: str | None, options: Options) -> object:
    """``kind`` PASSWORD: a sensitive config, its value hidden (null)."""
    source = chain[0].source if chain else ConfigSource.DEFAULT_CONFIG
    synonyms = [Response.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                for s in chain] if options.synonyms else []
    return Entry(name=name, value=value, read_only=read_only, config_source=source,
                 is_sensitive=kind == ConfigType.PASSWORD, synonyms=synonyms, config_type=kind,
                 documentation=doc if options.documentation else None)


def _topic_entries(broker: Broker, topic: str, wanted, options: Options) -> Result:
    problem = topic_name_error(topic)
    if problem:
        return Result(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=problem)
    record = broker.topic(topic)
    if record is None:
        return Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None)
    return Result(error_code=ErrorCode.NONE, configs=[
        _entry(name, effective(broker.config, record.configs, name),
               broker.configs.topic_synonyms(record.configs, name), False, spec.type, spec.doc,
               options)
        for name, spec in sorted(TOPIC_CONFIGS.items()) if _picked(name, wanted)])


def _broker_entries(broker: Broker, resource: str, wanted, options: Options) -> Result:
    problem = broker_configs.resource_error(resource, broker.node.node_id, describe=True)
    if problem:
        return _invalid(problem)
    per_broker = resource != ""
    names = sorted(SETTINGS) if per_broker else sorted(broker.configs.cluster)
    return Result(error_code=ErrorCode.NONE, configs=[
        _entry(name, broker.configs.value(name) if per_broker else broker.configs.cluster[name],
               broker.configs.synonyms(name, per_broker), name not in broker_configs.DYNAMIC,
               broker_configs.config_type(name), SETTINGS[name].help, options)
        for name in names if _picked(name, wanted)])


def _picked(name: str, wanted: list[str] | None) -> bool:
    return not wanted or name in wanted


def _invalid(message: str) -> Result:
    return Result(error_code=ErrorCode.INVALID_REQUEST, error_message=message)


def _describe(broker: Broker, resource, options: Options) -> Result:
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == ResourceType.TOPIC:
        result = _topic_entries(broker, name, resource.configuration_keys, options)
    elif rtype == ResourceType.BROKER:
        result = _broker_entries(broker, name, resource.configuration_keys, options)
    else:
        kind = ResourceType(rtype).name if rtype in ResourceType._value2member_map_ else rtype
        result = _invalid(f"Unsupported resource type: {kind}")
    result.resource_type, result.resource_name = rtype, name
    return result


async def handle(ctx: RequestContext, request) -> object:
    options = Options(request)
    results = []
    for resource in request.resources:
        denied = config_admin.authorization_problem(ctx, resource.resource_type,
                                                    resource.resource_name, DESCRIBE_CONFIGS)
        results.append(_describe(ctx.broker, resource, options) if denied is None else
                       Result(error_code=denied[0], error_message=None, configs=[],
                              resource_type=resource.resource_type,
                              resource_name=resource.resource_name))
    return Response(throttle_time_ms=0, results=results)
