"""Kafka's topic-level configs: names, types, defaults and validation.

Topics keep only the values set on them (``TopicRecord.configs``); everything else reads the
broker default. CommitGate acts on ``retention.ms``, ``retention.bytes``,
``max.message.bytes``, ``message.timestamp.type``, ``message.timestamp.before.max.ms``,
``message.timestamp.after.max.ms``, ``cleanup.policy`` and the compaction settings; the other
names are accepted and stored
so that tools which set them (Kafka Connect, Streams, Spark) keep working, and their
documentation (DescribeConfigs v3+) says so. Validation messages are Kafka's ConfigDef ones.
The names, types, defaults and limits are Kafka 4's (KIP-1030: segment.bytes at least 1 MiB,
message.timestamp.after.max.ms one hour); ``synonym`` is the broker config Kafka lists first
behind each (ServerTopicConfigSynonyms), left out where that config has no built-in value
(log.roll.ms, log.roll.jitter.ms, log.flush.interval.ms), since Kafka then shows no synonym.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from commitgate.gateway.config import BrokerConfig


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config types (Kafka's ConfigDef.Type order)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True)
class TopicConfig:
    name: str
    type: ConfigType
    default: Callable[[BrokerConfig], str | None]
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    synonym: str | None = None  # the broker-level config the default comes from
    doc: str = "Accepted and stored for compatibility; CommitGate does not act on it."
    maximum: float | None = None


def _const(value: str | None) -> Callable[[BrokerConfig], str | None]:
    return lambda _config: value


_WEEK_MS = str(7 * 24 * 3600 * 1000)
TOPIC_CONFIGS: dict[str, TopicConfig] = {c.name: c for c in [
    TopicConfig("cleanup.policy", ConfigType.LIST, lambda c: c.store.log_cleanup_policy,
                ("delete", "compact"), synonym="log.cleanup.policy",
                doc="delete: retention.ms / retention.bytes drop old batches; compact: the "
                    "last record of every key is kept and older ones are removed; both: both."),
    TopicConfig("compression.type", ConfigType.STRING, _const("producer"),
                ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                synonym="compression.type"),
    TopicConfig("compression.gzip.level", ConfigType.INT, _const("-1"),
                synonym="compression.gzip.level"),
    TopicConfig("compression.lz4.level", ConfigType.INT, _const("9"),
                synonym="compression.lz4.level"),
    TopicConfig("compression.zstd.level", ConfigType.INT, _const("3"),
                synonym="compression.zstd.level"),
    TopicConfig("delete.retention.ms", ConfigType.LONG,
                lambda c: str(c.store.delete_retention_ms), minimum=0,
                synonym="log.cleaner.delete.retention.ms",
                doc="Compacted topics: how long tombstones (records with a null value) are "
                    "kept after their timestamp before a cleaning removes them."),
    TopicConfig("file.delete.delay.ms", ConfigType.LONG, _const("60000"), minimum=0,
                synonym="log.segment.delete.delay.ms"),
    TopicConfig("flush.messages", ConfigType.LONG, _const("9223372036854775807"), minimum=1,
                synonym="log.flush.interval.messages"),
    TopicConfig("flush.ms", ConfigType.LONG, _const("9223372036854775807"), minimum=0),
    TopicConfig("follower.replication.throttled.replicas", ConfigType.LIST, _const("")),
    TopicConfig("index.interval.bytes", ConfigType.INT, _const("4096"), minimum=0,
                synonym="log.index.interval.bytes"),
    TopicConfig("leader.replication.throttled.replicas", ConfigType.LIST, _const("")),
    TopicConfig("local.retention.bytes", ConfigType.LONG, _const("-2"), minimum=-2,
                synonym="log.local.retention.bytes"),
    TopicConfig("local.retention.ms", ConfigType.LONG, _const("-2"), minimum=-2,
                synonym="log.local.retention.ms"),
    TopicConfig("max.compaction.lag.ms", ConfigType.LONG,
                lambda c: str(c.store.max_compaction_lag_ms), minimum=1,
                synonym="log.cleaner.max.compaction.lag.ms",
                doc="Compacted topics: a dirty record older than this is cleaned whatever "
                    "the dirty ratio."),
    TopicConfig("max.message.bytes", ConfigType.INT, lambda c: str(c.message_max_bytes),
                minimum=0, synonym="message.max.bytes",
                doc="The largest record batch (after compression) a producer may append."),
    TopicConfig("message.timestamp.after.max.ms", ConfigType.LONG, _const("3600000"),
                minimum=0, synonym="log.message.timestamp.after.max.ms",
                doc="CreateTime topics: a produced record whose timestamp is more than this "
                    "ahead of the broker's clock is refused with INVALID_TIMESTAMP."),
    TopicConfig("message.timestamp.before.max.ms", ConfigType.LONG,
                _const("9223372036854775807"), minimum=0,
                synonym="log.message.timestamp.before.max.ms",
                doc="CreateTime topics: a produced record whose timestamp is more than this "
                    "behind the broker's clock is refused with INVALID_TIMESTAMP."),
    TopicConfig("message.timestamp.type", ConfigType.STRING, _const("CreateTime"),
                ("CreateTime", "LogAppendTime"), synonym="log.message.timestamp.type",
                doc="CreateTime keeps the producer's timestamps; LogAppendTime stamps each "
                    "batch with the broker's clock when it is stored."),
    TopicConfig("min.cleanable.dirty.ratio", ConfigType.DOUBLE,
                lambda c: str(c.store.min_cleanable_dirty_ratio), minimum=0, maximum=1,
                synonym="log.cleaner.min.cleanable.ratio",
                doc="Compacted topics: a partition is cleaned once the bytes written since its "
                    "last cleaning are this share of its bytes."),
    TopicConfig("min.compaction.lag.ms", ConfigType.LONG,
                lambda c: str(c.store.min_compaction_lag_ms), minimum=0,
                synonym="log.cleaner.min.compaction.lag.ms",
                doc="Compacted topics: records younger than this are not cleaned."),
    TopicConfig("min.insync.replicas", ConfigType.INT, lambda c: str(c.min_insync_replicas),
                minimum=1, synonym="min.insync.replicas",
                doc="Accepted and stored for compatibility; with one replica every write has "
                    "one in-sync replica, and CommitGate does not refuse acks=all below this."),
    TopicConfig("preallocate", ConfigType.BOOLEAN, _const("false"), synonym="log.preallocate"),
    TopicConfig("remote.log.copy.disable", ConfigType.BOOLEAN, _const("false")),
    TopicConfig("remote.log.delete.on.disable", ConfigType.BOOLEAN, _const("false")),
    TopicConfig("remote.storage.enable", ConfigType.BOOLEAN, _const("false")),
    TopicConfig("retention.bytes", ConfigType.LONG, lambda c: str(c.store.log_retention_bytes),
                synonym="log.retention.bytes",
                doc="Once a partition holds more bytes than this, its oldest batches are "
                    "dropped by moving its log start offset (-1: no limit)."),
    TopicConfig("retention.ms", ConfigType.LONG, lambda c: str(c.store.log_retention_ms),
                minimum=-1, synonym="log.retention.ms",
                doc="Batches whose newest timestamp is older than this are dropped by moving "
                    "the partition's log start offset (-1: keep forever)."),
    TopicConfig("segment.bytes", ConfigType.INT, lambda c: str(c.store.commitlog_segment_bytes),
                minimum=1_048_576, synonym="log.segment.bytes"),
    TopicConfig("segment.index.bytes", ConfigType.INT, _const("10485760"), minimum=4,
                synonym="log.index.size.max.bytes"),
    TopicConfig("segment.jitter.ms", ConfigType.LONG, _const("0"), minimum=0),
    TopicConfig("segment.ms", ConfigType.LONG, _const(_WEEK_MS), minimum=1),
    TopicConfig("unclean.leader.election.enable", ConfigType.BOOLEAN, _const("false"),
                synonym="unclean.leader.election.enable"),
]}


def config_error(name: str, value: str | None) -> str | None:
    """Why ``name=value`` is not a valid topic config, or None when it is."""
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    try:
        _check_value(spec, value)
    except ValueError as exc:
        return f"Invalid value {value} for configuration {name}: {exc}"
    return None


_NUMBER_TYPES = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def _check_value(spec: TopicConfig, value: str) -> None:
    kind = spec.type
    if kind == ConfigType.BOOLEAN and value.strip().lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    if kind in _NUMBER_TYPES or kind == ConfigType.DOUBLE:
        _check_number(spec, _parse_number(kind, value))
    items = [v.strip() for v in value.split(",")] if kind == ConfigType.LIST else [value]
    if spec.choices and any(item not in spec.choices for item in items if item):
        raise ValueError(f"String must be one of: {', '.join(spec.choices)}")


def _parse_number(kind: ConfigType, value: str) -> float:
    """As Java's parseInt / parseLong / parseDouble, which ConfigDef uses."""
    try:
        number = float(value) if kind == ConfigType.DOUBLE else int(value.strip(), 10)
    except ValueError:
        raise ValueError(f"Not a number of type {kind.name}") from None
    bits = _NUMBER_TYPES.get(kind)
    if bits is not None and not -2 ** (bits - 1) <= number < 2 ** (bits - 1):
        raise ValueError(f"Not a number of type {kind.name}")
    return number


def _check_number(spec: TopicConfig, number: float) -> None:
    if spec.minimum is not None and number < spec.minimum:
        raise ValueError(f"Value must be at least {spec.minimum}")
    if spec.maximum is not None and number > spec.maximum:
        raise ValueError(f"Value must be no more than {spec.maximum}")


def effective(config: BrokerConfig, topic_configs: dict[str, str], name: str) -> str | None:
    """The value in force: the topic's own, else the broker default."""
    if name in topic_configs:
        return topic_configs[name]
    return TOPIC_CONFIGS[name].default(config)
