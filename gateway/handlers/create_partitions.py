"""CreatePartitions (key 37), v0-3: grow topics, or only validate the growth, with the checks
and messages of Kafka's controller.

A topic named twice is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a count that
is not larger than the current one INVALID_PARTITIONS. Manual assignments must list one replica
set per added partition, each naming this broker once (one broker: replication factor 1),
else INVALID_REPLICA_ASSIGNMENT. New partitions are empty and can be produced to as soon as
the answer comes (their directories and the table's fsync run off the event loop).

Beyond Kafka: an internal topic is refused (INVALID_REQUEST: its coordinator maps keys to its
partitions by their count, so growing it would move every group), and so is a growth past
``max.broker.partitions`` (POLICY_VIOLATION, as CreateTopics).
"""
from __future__ import annotations

import collections
import logging

from commitgate.gateway.broker import STORE_ERRORS, Broker
from commitgate.gateway.groups.offsets_topic import internal_refusal, is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import ALTER
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 37
VERSIONS = (0, 3)
REPLICATION_FACTOR = 1

Response = messages.get("CreatePartitionsResponse").cls
Result = Response.CreatePartitionsTopicResult

Problem = tuple[ErrorCode, str | None]


def _assignment_problem(broker: Broker, broker_ids: list[int]) -> str | None:
    """Kafka's validateManualPartitionAssignment for one new partition."""
    if not broker_ids:
        return "The manual partition assignment includes an empty replica list."
    known = {node.node_id for node in broker.nodes()}
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in known:
            return (f"The manual partition assignment includes broker {broker_id}, but no such "
                    f"broker is registered.")
        if broker_id == previous:
            return (f"The manual partition assignment includes the broker {broker_id} more "
                    f"than once.")
        previous = broker_id
    if len(broker_ids) != REPLICATION_FACTOR:
        return (f"The manual partition assignment includes a partition with {len(broker_ids)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{REPLICATION_FACTOR} replica(s).")
    return None


def _problem(broker: Broker, topic) -> Problem | None:
    record = broker.topic(topic.name)
    if record is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if is_internal(topic.name):
        return ErrorCode.INVALID_REQUEST, internal_refusal(topic.name, "add partitions to")
    current = record.partitions
    if topic.count == current:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
    if topic.count < current:
        return ErrorCode.INVALID_PARTITIONS, (f"The topic {topic.name} currently has {current} "
                                              f"partition(s); {topic.count} would not be an "
                                              f"increase.")
    if topic.assignments is None:
        return None
    added = topic.count - current
    if len(topic.assignments) != added:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
            f"Attempted to add {added} additional partition(s), but only "
            f"{len(topic.assignments)} assignment(s) were specified.")
    problems = (_assignment_problem(broker, a.broker_ids) for a in topic.assignments)
    problem = next((p for p in problems if p), None)
    return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem) if problem else None


async def _grow(ctx: RequestContext, topic, validate_only: bool) -> Problem | None:
    broker = ctx.broker
    if not ctx.allowed(ALTER, TOPIC, topic.name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    problem = _problem(broker, topic)
    if problem is None:
        limit = broker.config.max_broker_partitions
        result = broker.store.create_partitions(topic.name, topic.count, validate_only=True,
                                                max_partitions=limit) if validate_only \
            else await broker.store.create_partitions_off_loop(topic.name, topic.count,
                                                               max_partitions=limit)
        if STORE_ERRORS[result.status] is not ErrorCode.NONE:
            problem = STORE_ERRORS[result.status], result.error
    if problem is not None:
        log.info("create partitions of %r from %s refused: %s", topic.name, ctx.who(), problem)
        return problem
    if not validate_only:
        log.info("topic %s now has %d partitions (for %s)", topic.name, topic.count, ctx.who())
    return None


async def handle(ctx: RequestContext, request) -> object:
    counts = collections.Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:  # reported once, as Kafka does
            counts[topic.name] = 0
            problem = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        elif counts[topic.name] == 0:
            continue
        else:
            problem = await _grow(ctx, topic, request.validate_only)
        code, message = problem or (ErrorCode.NONE, None)
        results.append(Result(name=topic.name, error_code=code, error_message=message))
    return Response(throttle_time_ms=0, results=results)
