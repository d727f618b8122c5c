"""CreateTopics (key 19), including validate-only requests, with Kafka's checks and messages.

Two limits Kafka's controller does not have: an internal topic that does not exist yet is
refused (INVALID_REQUEST; its coordinator creates it in its own shape: a ``__consumer_offsets``
of one partition made by a client would leave groups mapped to partitions it lacks), and a
creation that would take the broker past ``max.broker.partitions`` (KIP-578, never shipped by
Kafka) is refused with POLICY_VIOLATION, the code Kafka answers when a create-topic policy
refuses a topic (KIP-578's own RESOURCE_LIMIT_REACHED was never added). Directories and the
topic table's fsync run off the event loop (``MessageStore.create_topic_off_loop``).
"""
from __future__ import annotations

import collections
import logging
import uuid

from commitgate.engine import StoreStatus
from commitgate.engine.status import TopicResult
from commitgate.gateway.broker import STORE_ERRORS, Broker
from commitgate.gateway.groups.offsets_topic import internal_refusal, is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, TOPIC
from commitgate.gateway.security.authorizer import CREATE
from commitgate.gateway.topic_configs import TOPIC_CONFIGS, config_error, effective
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 19
VERSIONS = (2, 7)
DEFAULT_CONFIG = 5  # DescribeConfigs ConfigSource
DYNAMIC_TOPIC_CONFIG = 1

Response = messages.get("CreateTopicsResponse").cls
Result = Response.CreatableTopicResult


def _shape(broker: Broker, topic) -> tuple[int, ErrorCode, str]:
    """(partition count, error, message) from num_partitions / replication / assignments."""
    brokers = len(broker.nodes())
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return 0, ErrorCode.INVALID_REQUEST, ("Both numPartitions or replicationFactor and "
                                                  "replicasAssignments were set. Both cannot be used at the same time.")
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            return 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                "Partitions should be a consecutive 0-based integer sequence")
        known = {n.node_id for n in broker.nodes()}
        for a in topic.assignments:
            if not a.broker_ids or set(a.broker_ids) - known or \
                    len(set(a.broker_ids)) != len(a.broker_ids):
                return 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Invalid replica assignment {a.broker_ids} for partition "
                    f"{a.partition_index}: brokers are {sorted(known)}")
        return len(indexes), ErrorCode.NONE, ""
    partitions = topic.num_partitions
    if partitions == -1:
        partitions = broker.config.num_partitions
    if partitions <= 0:
        return 0, ErrorCode.INVALID_PARTITIONS, \
            "Number of partitions was set to an invalid non-positive value."
    replication = topic.replication_factor
    if replication == -1:
        replication = broker.config.default_replication_factor
    if replication <= 0:
        return 0, ErrorCode.INVALID_REPLICATION_FACTOR, \
            "Replication factor must be larger than 0, or -1 to use the default value."
    if replication > brokers:
        return 0, ErrorCode.INVALID_REPLICATION_FACTOR, (
            f"Unable to replicate the partition {replication} time(s): The target replication "
            f"factor of {replication} cannot be reached because only {brokers} broker(s) are "
            f"registered.")
    return partitions, ErrorCode.NONE, ""


def _configs_out(broker: Broker, configs: dict[str, str]) -> list:
    return [Response.CreatableTopicConfigs(
        name=name, value=effective(broker.config, configs, name), read_only=False,
        config_source=DYNAMIC_TOPIC_CONFIG if name in configs else DEFAULT_CONFIG,
        is_sensitive=False) for name in sorted(TOPIC_CONFIGS)]


async def _create(ctx: RequestContext, topic, validate_only: bool) -> object:
    broker = ctx.broker
    out = Result(name=topic.name, error_code=ErrorCode.NONE, num_partitions=-1,
                 replication_factor=-1, configs=None)
    partitions, error, message = _shape(broker, topic)
    if not (ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME) or ctx.allowed(CREATE, TOPIC, topic.name)):
        error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    if error is ErrorCode.NONE:
        problems = [p for p in (config_error(c.name, c.value) for c in topic.configs) if p]
        if problems:
            error, message = ErrorCode.INVALID_CONFIG, problems[0]
    if error is ErrorCode.NONE and is_internal(topic.name) and broker.topic(topic.name) is None:
        error, message = ErrorCode.INVALID_REQUEST, internal_refusal(topic.name, "create")
    if error is ErrorCode.NONE:
        result = await _store_create(broker, topic.name, partitions, configs, validate_only)
        error = STORE_ERRORS[result.status]
        message = result.error
        if result.status is StoreStatus.TOPIC_ALREADY_EXISTS:
            message = f"Topic '{topic.name}' already exists."
    if error is not ErrorCode.NONE:
        out.error_code, out.error_message = error, message
        log.info("create topic %r from %s refused: %s", topic.name, ctx.who(), message)
        return out
    record = broker.topic(topic.name)
    out.topic_id = uuid.UUID(record.topic_id) if record else None
    out.num_partitions, out.replication_factor = partitions, 1
    out.configs = _configs_out(broker, configs)
    if not validate_only:
        log.info("created topic %s (%d partitions) for %s", topic.name, partitions, ctx.who())
    return out


async def _store_create(broker: Broker, name: str, partitions: int, configs: dict[str, str],
                        validate_only: bool) -> TopicResult:
    limit = broker.config.max_broker_partitions
    if validate_only:
        return broker.store.create_topic(name, partitions, configs, validate_only=True,
                                         max_partitions=limit)
    return await broker.store.create_topic_off_loop(name, partitions, configs,
                                                    max_partitions=limit)


async def handle(ctx: RequestContext, request) -> object:
    counts = collections.Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(Result(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Found multiple entries for this topic.",
                                  num_partitions=-1, replication_factor=-1))
            continue
        results.append(await _create(ctx, topic, request.validate_only))
    return Response(throttle_time_ms=0, topics=results)
