"""``/v1/topics``, ``/v1/topics/{name}`` and ``/v1/groups``: what the broker holds, as JSON.

A topic's detail has each partition's log start and end offsets and its bytes in the CommitLog
(DescribeLogDirs' count: the first request after a start walks the partition once, in slices),
and every topic config with the value in force and where it comes from (DescribeConfigs'
source). Groups are both kinds (classic and KIP-848) with their state, members and the lag of
each committed partition (log end offset minus committed offset).
"""
from __future__ import annotations

from aiohttp import web

from commitgate.engine.topic_table import TopicRecord
from commitgate.gateway.admin.query import error
from commitgate.gateway.broker import Broker
from commitgate.gateway.broker_configs import ConfigSource
from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.topic_configs import TOPIC_CONFIGS, effective


def routes(broker: Broker) -> list[web.RouteDef]:
    async def topics(_request: web.Request) -> web.Response:
        return web.json_response({"topics": [_summary(t) for t in sorted(
            broker.store.topics(), key=lambda t: t.name)]})

    async def topic(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = broker.topic(name)
        if record is None:
            return error(404, f"unknown topic {name}")
        return web.json_response(await describe_topic(broker, record))

    async def groups(_request: web.Request) -> web.Response:
        return web.json_response({"groups": list_groups(broker)})

    return [web.get("/v1/topics", topics), web.get("/v1/topics/{name}", topic),
            web.get("/v1/groups", groups)]


def _summary(record: TopicRecord) -> dict:
    return {"name": record.name, "topic_id": record.topic_id, "partitions": record.partitions,
            "internal": is_internal(record.name)}


async def describe_topic(broker: Broker, record: TopicRecord) -> dict:
    store, name = broker.store, record.name
    partitions = [{"partition": p, "log_start_offset": store.log_start_offset(name, p),
                   "log_end_offset": store.log_end_offset(name, p),
                   "size_bytes": await store.partition_size(name, p)}
                  for p in range(record.partitions)]
    return _summary(record) | {"partitions": partitions,
                               "size_bytes": sum(p["size_bytes"] for p in partitions),
                               "configs": topic_configs(broker, record)}


def topic_configs(broker: Broker, record: TopicRecord) -> list[dict]:
    """Every topic config with its value in force and its source, as DescribeConfigs has it."""
    out = []
    for name in sorted(TOPIC_CONFIGS):
        chain = broker.configs.topic_synonyms(record.configs, name)
        source = chain[0].source if chain else ConfigSource.DEFAULT_CONFIG
        out.append({"name": name, "value": effective(broker.config, record.configs, name),
                    "source": source.name})
    return out


def list_groups(broker: Broker) -> list[dict]:
    coordinator = broker.groups
    listed = sorted(coordinator.list([], []), key=lambda g: g.group_id)
    return [{"group": g.group_id, "type": g.type, "state": g.state,
             "protocol_type": g.protocol_type, "members": _members(broker, g.group_id),
             "lag": _lag(broker, g.group_id)} for g in listed]


def _members(broker: Broker, group_id: str) -> list[dict]:
    consumer_group = broker.groups.consumer_groups.get(group_id)
    if consumer_group is not None:
        names = {topic_id: name for name, (topic_id, _) in consumer_group.topics.items()}
        return [{"member_id": m.member_id, "instance_id": m.instance_id,
                 "client_id": m.client_id, "client_host": m.client_host, "epoch": m.epoch,
                 "assigned": [f"{names.get(t, t)}-{p}" for t, ps in m.assigned.items()
                              for p in sorted(ps)]}
                for m in consumer_group.members.values()]
    classic = broker.groups.describe(group_id)
    return [] if classic is None else [
        {"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
         "client_host": m.client_host} for m in classic.members.values()]


def _lag(broker: Broker, group_id: str) -> list[dict]:
    """Committed partitions with their lag; a partition of a deleted topic has no log end."""
    committed = broker.groups.offsets.table.get(group_id, {})
    rows = []
    for (topic, partition), value in sorted(committed.items()):
        end = broker.store.log_end_offset(topic, partition)
        rows.append({"topic": topic, "partition": partition, "committed": value.offset,
                     "log_end_offset": end, "lag": max(end - value.offset, 0) if end >= 0
                     else None})
    return rows
