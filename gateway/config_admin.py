"""What AlterConfigs and IncrementalAlterConfigs share: Kafka's checks of a config resource
(ConfigAdminManager on the broker, the controller's validator), then the change itself.

A handler works out the complete new config set of a resource (AlterConfigs: the set given;
IncrementalAlterConfigs: the current set with the operations applied) and hands it to
``alter``: topic sets are validated as a whole (INVALID_CONFIG), then the topic must exist
(UNKNOWN_TOPIC_OR_PARTITION); broker sets are a dynamic layer (INVALID_REQUEST, as Kafka), and
the controller's ELR rules for min.insync.replicas (INVALID_CONFIG).
"""
from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Callable

from commitgate.engine.topic_table import topic_name_error
from commitgate.gateway import broker_configs
from commitgate.gateway.broker import Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security import acl_store
from commitgate.gateway.topic_configs import config_error
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Problem = tuple[ErrorCode, str | None]


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def respond(response_cls: type, request, alter_one: Callable[[object], Problem | None]
            ) -> object:
    """The (Incremental)AlterConfigs response, one entry per resource: a resource named more
    than once is refused in every copy, as Kafka does; the others are altered one by one."""
    counts = collections.Counter((r.resource_type, r.resource_name) for r in request.resources)
    entries = []
    for resource in request.resources:
        twice = counts[(resource.resource_type, resource.resource_name)] > 1
        code, message = (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.") \
            if twice else alter_one(resource) or (ErrorCode.NONE, None)
        entries.append(response_cls.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return response_cls(throttle_time_ms=0, responses=entries)


def authorization_problem(ctx: RequestContext, rtype: int, name: str,
                          operation: int) -> Problem | None:
    """A topic's configs need ``operation`` on the topic, a broker's on the cluster."""
    if rtype == ResourceType.TOPIC and not ctx.allowed(operation, acl_store.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if rtype == ResourceType.BROKER and \
            not ctx.allowed(operation, acl_store.CLUSTER, acl_store.CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


def entries_problem(names: list[str], null_values: list[str]) -> Problem | None:
    """Duplicate keys, or null values where one is needed."""
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    if null_values:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_values)}"
    return None


def resource_problem(broker: Broker, rtype: int, name: str) -> Problem | None:
    """Whether CommitGate can change the configs of this resource at all."""
    if rtype == ResourceType.BROKER:
        problem = broker_configs.resource_error(name, broker.node.node_id)
        return (ErrorCode.INVALID_REQUEST, problem) if problem else None
    if rtype == ResourceType.TOPIC:
        if not name:
            return ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
        problem = topic_name_error(name)
        return (ErrorCode.INVALID_TOPIC_EXCEPTION, problem) if problem else None
    return ErrorCode.INVALID_REQUEST, f"Unknown resource type {rtype}"


def current(broker: Broker, rtype: int, name: str) -> dict[str, str]:
    """The configs set on a resource (checked by ``resource_problem``): a topic's own, or the
    dynamic broker layer the name selects; empty for a topic that does not exist."""
    if rtype == ResourceType.BROKER:
        return dict(broker.configs.layer(per_broker=name != ""))
    topic = broker.topic(name)
    return dict(topic.configs) if topic else {}


def alter(broker: Broker, rtype: int, name: str, new: dict[str, str], validate_only: bool
          ) -> Problem | None:
    """Make ``new`` the whole config set of the resource (unless ``validate_only``)."""
    if rtype == ResourceType.BROKER:
        return _alter_broker(broker, name != "", new, validate_only)
    return _alter_topic(broker, name, new, validate_only)


def _alter_broker(broker: Broker, per_broker: bool, new: dict[str, str], validate_only: bool
                  ) -> Problem | None:
    problem = broker_configs.validate(new)
    if problem:
        return ErrorCode.INVALID_REQUEST, problem
    problem = broker_configs.elr_error(per_broker, new)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem
    if not validate_only:
        broker.configs.replace(per_broker, new)
    return None


def _alter_topic(broker: Broker, name: str, new: dict[str, str], validate_only: bool
                 ) -> Problem | None:
    problem = next((p for p in (config_error(k, v) for k, v in new.items()) if p), None)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem
    topic = broker.topic(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if validate_only:
        return None
    changes: dict[str, str | None] = {k: None for k in topic.configs if k not in new}
    changes.update(new)
    broker.store.alter_topic_configs(name, changes, save=False)  # saved by save_topic_changes
    log.info("topic %s configs now %s", name, new)
    return None


async def save_topic_changes(broker: Broker, request) -> None:
    """Write the topic table on its own thread (its fsync must not hold the loop) once the
    request's topic configs changed, before the answer: a change answered is durable."""
    if not request.validate_only and \
            any(r.resource_type == ResourceType.TOPIC for r in request.resources):
        await broker.store.table.save_off_loop()
