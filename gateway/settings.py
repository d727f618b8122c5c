"""Broker settings from a Kafka-style ``.properties`` file plus ``--override KEY=VALUE`` pairs.

Names follow Kafka's broker configs where one exists and RocketMQ's store settings otherwise;
each maps onto one ``BrokerConfig`` field, ``store.``-prefixed fields onto its ``StoreConfig``.
Unknown names are refused, so a typo never passes silently.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from commitgate.engine.config import FlushDiskType
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.endpoint import Endpoint
from commitgate.gateway.groups.assignors import ASSIGNORS
from commitgate.gateway.security import listeners
from commitgate.gateway.security.config import (
    MECHANISMS,
    SECURITY_SETTINGS,
    SecurityConfig,
    split_listener_key,
)
from commitgate.gateway.udp_framing import FORMATS as UDP_FORMATS


@dataclass(frozen=True)
class Setting:
    field: str
    parse: Callable[[str], object]
    help: str


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _endpoint_url(text: str, scheme: str, label: str) -> Endpoint | None:
    """``scheme://host:port`` (one; IPv6 hosts in brackets), or empty: None (turned off)."""
    text = text.strip()
    if not text:
        return None
    given, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if given.lower() != scheme or not sep or not colon or not host or not port.isdigit() \
            or "/" in address or "," in address or not 0 <= int(port) < 65536:
        raise ValueError(f"expected one {scheme}://HOST:PORT{label}, or nothing to turn it off")
    return Endpoint(host.strip("[]"), int(port))


def _admin_listener(text: str) -> Endpoint | None:
    """``http://HOST:PORT`` or ``https://HOST:PORT`` (the scheme is read again at the end)."""
    scheme = "https" if text.strip().lower().startswith("https://") else "http"
    try:
        endpoint = _endpoint_url(text, scheme, "")
    except ValueError:
        raise ValueError("expected one http://HOST:PORT or https://HOST:PORT, or nothing to "
                         "turn it off") from None
    if endpoint is not None and endpoint.port == 0:
        raise ValueError("expected one http://HOST:PORT or https://HOST:PORT with a port "
                         "above 0")
    return endpoint


ADMIN_AUTHENTICATION = ("none", "basic", "bearer")


def _admin_authentication(text: str) -> str:
    if text.strip().lower() not in ADMIN_AUTHENTICATION:
        raise ValueError(f"expected one of {list(ADMIN_AUTHENTICATION)}")
    return text.strip().lower()


def _udp_listener(text: str) -> Endpoint | None:
    return _endpoint_url(text, "udp", "")


def _principals(text: str) -> tuple[str, ...]:
    """``User:a;User:b`` (Kafka's super.users separator is the semicolon)."""
    principals = tuple(p.strip() for p in text.split(";") if p.strip())
    bad = [p for p in principals if ":" not in p]
    if bad:
        raise ValueError(f"expected TYPE:NAME principals separated by ';', got {bad[0]!r}")
    return principals


def _udp_format(text: str) -> str:
    if text not in UDP_FORMATS:
        raise ValueError(f"expected one of {sorted(UDP_FORMATS)}")
    return text


def _positive(text: str) -> int:
    if int(text) <= 0:
        raise ValueError("expected a positive number")
    return int(text)


def _per_ip_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's max.connections.per.ip.overrides)."""
    overrides = {}
    for item in text.split(","):
        if item.strip():
            host, sep, count = item.strip().rpartition(":")
            if not sep or not count.strip().isdigit():
                raise ValueError(f"expected host:count pairs, got {item!r}")
            overrides[host.strip("[] ")] = int(count)
    return overrides


def _replication_factor(text: str) -> int:
    if int(text) != 1:
        raise ValueError("CommitGate is a single broker: the replication factor is 1")
    return 1


def _assignors(text: str) -> tuple[str, ...]:
    """Assignor names (Kafka also takes class names: their simple name, lower case, minus a
    trailing "Assignor", picks ours)."""
    names = tuple(_assignor_name(item) for item in text.split(",") if item.strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise ValueError(f"assignors must be among {sorted(ASSIGNORS)}, got {text!r}")
    return names


def _assignor_name(item: str) -> str:
    return item.strip().rsplit(".", 1)[-1].lower().removesuffix("assignor")


def _log_dirs(text: str) -> Path:
    dirs = [d for d in text.split(",") if d.strip()]
    if len(dirs) != 1:
        raise ValueError("exactly one directory is supported in log.dirs")
    return Path(dirs[0].strip())


SETTINGS: dict[str, Setting] = {
    # resolved together once all are read (_resolve_listeners): no field of their own
    "listeners": Setting("", listeners.parse_addresses,
                         "NAME://HOST:PORT entries, comma-separated: where to listen, each with "
                         "the security protocol its name maps to (default "
                         "PLAINTEXT://127.0.0.1:9092)"),
    "advertised.listeners": Setting("", listeners.parse_addresses,
                                    "NAME://HOST:PORT: the address clients of each listener are "
                                    "given (default: the listener's own)"),
    "listener.security.protocol.map": Setting(
        "", listeners.parse_protocol_map,
        "NAME:PROTOCOL pairs: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL for each listener "
        "name (default: each protocol's own name)"),
    "admin.listeners": Setting("admin_listener", _admin_listener,
                               "the admin HTTP API and Prometheus /metrics as http://HOST:PORT "
                               "or https://HOST:PORT (the ssl.keystore.* settings' key); empty: "
                               "off (default http://127.0.0.1:9644)"),
    "admin.authentication": Setting(
        "admin_authentication", _admin_authentication,
        "the admin HTTP API's clients: basic (HTTP basic against the SCRAM users), bearer (a "
        "JWT checked as OAUTHBEARER's) or none; none is the default on loopback only, and must "
        "be set to serve anyone beyond it (/healthz and /readyz never ask)"),
    "udp.listeners": Setting("udp_listener", _udp_listener,
                             "UDP ingest: datagrams become records, as udp://HOST:PORT; "
                             "empty: off (the default)"),
    "udp.topic": Setting("udp_topic", str, "UDP ingest: the topic of datagrams that name none"),
    "udp.format": Setting("udp_format", _udp_format,
                          "UDP ingest: raw (the datagram is the value, the default), tsv "
                          "(TOPIC<TAB>KEY<TAB>VALUE) or json ({topic, key, value})"),
    "udp.linger.ms": Setting("udp_linger_ms", int,
                             "UDP ingest: longest wait for a partition's batch to fill (5)"),
    "udp.batch.bytes": Setting("udp_batch_bytes", _positive,
                               "UDP ingest: a partition's batch is appended at this size "
                               "(262144, at most the topic's max.message.bytes)"),
    "udp.receive.buffer.bytes": Setting(
        "udp_receive_buffer_bytes", int,
        "UDP ingest: the socket's SO_RCVBUF, capped by net.core.rmem_max; -1: the OS default "
        "(4194304)"),
    "udp.max.datagram.bytes": Setting("udp_max_datagram_bytes", _positive,
                                      "UDP ingest: longer datagrams are dropped (65507)"),
    "authorizer.class.name": Setting(
        "authorizer_class_name", str,
        "any value (Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns on "
        "ACL authorization; empty: every client may do anything (the default)"),
    "super.users": Setting("super_users", _principals,
                           "principals allowed everything, as User:NAME;User:OTHER"),
    "allow.everyone.if.no.acl.found": Setting(
        "allow_everyone_if_no_acl_found", _bool,
        "with the authorizer on, allow a resource no ACL covers (false)"),
    "node.id": Setting("node_id", int, "this broker's id (default 1)"),
    "broker.id": Setting("node_id", int, "same as node.id"),
    "num.partitions": Setting("num_partitions", int,
                              "partitions of auto-created topics and of CreateTopics asking "
                              "for -1 (default 1)"),
    "default.replication.factor": Setting("default_replication_factor", _replication_factor,
                                          "accepted for compatibility; must be 1"),
    "min.insync.replicas": Setting(
        "min_insync_replicas", _positive,
        "default min.insync.replicas of topics (1); accepted for compatibility, one replica is "
        "always in sync"),
    "auto.create.topics.enable": Setting("auto_create_topics", _bool,
                                         "create unknown topics that a Metadata request or a "
                                         "UDP datagram names; Produce never creates (true)"),
    "message.max.bytes": Setting("message_max_bytes", int,
                                 "largest record batch of topics without their own "
                                 "max.message.bytes (default 1048588)"),
    "socket.request.max.bytes": Setting("socket_request_max_bytes", int,
                                        "largest request frame (default 104857600)"),
    "queued.max.request.bytes": Setting(
        "queued_max_request_bytes", int,
        "memory for requests read and not yet answered; reading waits while it is taken "
        "(536870912; Kafka's -1, no bound, is taken too)"),
    "max.connections": Setting("max_connections", int,
                               "connections accepted at once; the next waits (no limit)"),
    "max.connections.per.ip": Setting("max_connections_per_ip", int,
                                      "connections from one address; more are closed (no limit)"),
    "max.connections.per.ip.overrides": Setting(
        "max_connections_per_ip_overrides", _per_ip_overrides,
        "per-address limits as host:count,host:count"),
    "connections.max.idle.ms": Setting("connections_max_idle_ms", int,
                                       "close a connection with no request running that "
                                       "received and sent nothing this long; negative: never "
                                       "(600000)"),
    "quota.window.num": Setting("quota_window_num", _positive,
                                "client quotas: windows a rate is measured over (11)"),
    "quota.window.size.seconds": Setting("quota_window_size_seconds", _positive,
                                         "client quotas: seconds of one window (1)"),
    "max.broker.partitions": Setting("max_broker_partitions", int,
                                     "partitions of all topics together; CreateTopics and "
                                     "CreatePartitions beyond it are refused (100000)"),
    "delete.topic.enable": Setting("delete_topic_enable", _bool, "allow DeleteTopics (true)"),
    "producer.id.expiration.ms": Setting("producer_id_expiration_ms", int,
                                         "forget an idle idempotent producer's state after "
                                         "this long since its last batch (86400000)"),
    "producer.snapshot.interval.ms": Setting("producer_snapshot_interval_ms", int,
                                             "how often idempotent producers' state is "
                                             "snapshotted (10000)"),
    "group.min.session.timeout.ms": Setting("group_min_session_timeout_ms", int,
                                            "shortest session a group member may ask (6000)"),
    "group.max.session.timeout.ms": Setting("group_max_session_timeout_ms", int,
                                            "longest session a group member may ask (1800000)"),
    "group.initial.rebalance.delay.ms": Setting(
        "group_initial_rebalance_delay_ms", int,
        "how long an empty group waits for more members before its first rebalance (3000)"),
    "group.consumer.heartbeat.interval.ms": Setting(
        "consumer_group_heartbeat_interval_ms", int,
        "KIP-848 groups: how often members heartbeat (5000)"),
    "group.consumer.session.timeout.ms": Setting(
        "consumer_group_session_timeout_ms", int,
        "KIP-848 groups: a member is removed after this long without a heartbeat (45000)"),
    "group.consumer.assignors": Setting(
        "consumer_group_assignors", _assignors,
        "KIP-848 groups: server-side assignors, the first is the default (uniform,range)"),
    "offsets.topic.num.partitions": Setting("offsets_topic_num_partitions", int,
                                            "partitions of __consumer_offsets (50)"),
    "offsets.retention.minutes": Setting("offsets_retention_minutes", int,
                                         "committed offsets of empty groups expire after this "
                                         "(10080: 7 days)"),
    "offsets.retention.check.interval.ms": Setting("offsets_retention_check_interval_ms", int,
                                                   "how often offsets expire (600000)"),
    "offset.metadata.max.bytes": Setting("offset_metadata_max_bytes", int,
                                         "longest commit metadata string (4096)"),
    "transaction.state.log.num.partitions": Setting(
        "transaction_state_log_num_partitions", int, "partitions of __transaction_state (50)"),
    "transaction.max.timeout.ms": Setting(
        "transaction_max_timeout_ms", int,
        "longest transaction.timeout.ms a producer may ask (900000)"),
    "transactional.id.expiration.ms": Setting(
        "transactional_id_expiration_ms", int,
        "forget a transactional id idle this long outside a transaction (604800000)"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Setting(
        "transaction_abort_interval_ms", int,
        "how often transactions past their timeout are aborted (10000)"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": Setting(
        "transaction_expire_interval_ms", int, "how often transactional ids expire (3600000)"),
    "log.dirs": Setting("store.data_dir", _log_dirs, "data directory (default ./data)"),
    "log.dir": Setting("store.data_dir", _log_dirs, "same as log.dirs"),
    "flush.disk.type": Setting("store.flush_disk_type", lambda t: FlushDiskType(t.upper()),
                               "ASYNC_FLUSH (default) or SYNC_FLUSH (group commit)"),
    "commitlog.segment.bytes": Setting("store.commitlog_segment_bytes", int,
                                       "CommitLog segment size (default 1 GiB)"),
    "consumequeue.entries.per.file": Setting("store.consumequeue_entries_per_file", int,
                                             "ConsumeQueue units per file (default 300000)"),
    "flush.interval.ms": Setting("store.flush_interval_ms", int, "ASYNC_FLUSH timer (default 500)"),
    "flush.least.pages": Setting("store.flush_least_pages", int,
                                 "ASYNC_FLUSH syncs once this many pages are dirty (default 4)"),
    "flush.thorough.interval.ms": Setting("store.flush_thorough_interval_ms", int,
                                          "ASYNC_FLUSH syncs anything dirty this often"),
    "sync.flush.timeout.ms": Setting("store.sync_flush_timeout_ms", int,
                                     "SYNC_FLUSH: give up waiting for the disk after this"),
    "consumequeue.flush.interval.ms": Setting("store.consumequeue_flush_interval_ms", int,
                                              "ConsumeQueue sync timer (default 1000)"),
    "consumequeue.flush.least.pages": Setting(
        "store.consumequeue_flush_least_pages", int,
        "a ConsumeQueue file is synced once this many pages are dirty (default 2)"),
    "consumequeue.flush.thorough.interval.ms": Setting(
        "store.consumequeue_flush_thorough_interval_ms", int,
        "every dirty ConsumeQueue file is synced and the checkpoint saved this often (10000)"),
    "warm.mapped.file.enable": Setting("store.warm_mapped_file", _bool,
                                       "touch every page of a new CommitLog segment"),
    "index.enable": Setting("store.index_enable", _bool, "build the key IndexFiles (default true)"),
    "index.hash.slots": Setting("store.index_hash_slots", int, "IndexFile hash slots (5000000)"),
    "index.max.entries": Setting("store.index_max_entries", int, "IndexFile entries (20000000)"),
    "log.retention.check.interval.ms": Setting("store.retention_check_interval_ms", int,
                                               "how often retention runs (default 300000)"),
    "log.retention.ms": Setting("store.log_retention_ms", int, "default retention.ms (7 days)"),
    "log.retention.hours": Setting("store.log_retention_ms", lambda t: int(t) * 3_600_000,
                                   "default retention in hours"),
    "log.retention.bytes": Setting("store.log_retention_bytes", int, "default retention.bytes (-1)"),
    "log.cleaner.relocate.garbage.factor": Setting(
        "store.cleaner_garbage_factor", float,
        "relocate the oldest CommitLog segment's live entries while the segments hold more "
        "than this many times their live bytes (2.0)"),
    "log.cleanup.policy": Setting("store.log_cleanup_policy", str,
                                  "default cleanup.policy: delete, compact or both (delete)"),
    "log.cleaner.min.cleanable.ratio": Setting(
        "store.min_cleanable_dirty_ratio", float, "default min.cleanable.dirty.ratio (0.5)"),
    "log.cleaner.min.compaction.lag.ms": Setting(
        "store.min_compaction_lag_ms", int, "default min.compaction.lag.ms (0)"),
    "log.cleaner.max.compaction.lag.ms": Setting(
        "store.max_compaction_lag_ms", int, "default max.compaction.lag.ms (no limit)"),
    "log.cleaner.delete.retention.ms": Setting(
        "store.delete_retention_ms", int, "default delete.retention.ms (86400000: 1 day)"),
    "log.cleaner.dedupe.buffer.size": Setting(
        "store.cleaner_dedupe_buffer_size", int,
        "compaction's key map: 24 bytes a key, as Kafka counts it (134217728)"),
    "log.cleaner.io.max.bytes.per.second": Setting(
        "store.cleaner_io_max_bytes_per_second", float,
        "the CommitLog cleaner copies at most this many bytes a second (67108864)"),
    **{key: Setting(f"security.{name}", parse, f"{text}; listener.name.NAME.{key} for one "
                    f"listener" if key.startswith(("ssl.", "sasl.")) else text)
       for key, (name, parse, text) in SECURITY_SETTINGS.items()},
}


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` (or ``key: value``) lines; ``#`` and ``!`` start comments."""
    pairs = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ValueError(f"line {number}: expected key=value, got {raw!r}")
        pairs[line[:sep].strip()] = line[sep + 1 :].strip()
    return pairs


# settings that a finer synonym overrides when both are given
COARSER = frozenset({"log.retention.hours"})


def broker_config(properties: dict[str, str]) -> BrokerConfig:
    """Build the broker's settings; raises ValueError naming the bad key."""
    config = BrokerConfig(static_properties=dict(properties))
    per_listener: dict[str, dict[str, object]] = {}
    # a coarser synonym first, so the finer one wins whatever the order given (Kafka's rule)
    for key, text in sorted(properties.items(), key=lambda item: item[0] not in COARSER):
        named = split_listener_key(key)
        setting = SETTINGS.get(named[1] if named else key)
        if setting is None:
            raise ValueError(f"unknown setting {key!r} (see `commitgate serve --help`)")
        try:
            value = setting.parse(text)
        except ValueError as exc:
            raise ValueError(f"setting {key}={text!r}: {exc}") from None
        owner, _, name = setting.field.rpartition(".")
        if named:
            per_listener.setdefault(named[0], {})[name] = value
        elif owner == "security":
            config.security = replace(config.security, **{name: value})
        elif setting.field:  # the listener settings have none: _resolve_listeners reads them
            setattr(config.store if owner else config, name, value)
    config.store.__post_init__()
    _resolve_listeners(config, properties, per_listener)
    _check_admin(config, properties)
    if config.udp_listener is not None and config.udp_format == "raw" and not config.udp_topic:
        raise ValueError("udp.listeners with udp.format=raw needs udp.topic")
    return config


def _resolve_listeners(config: BrokerConfig, properties: dict[str, str],
                       per_listener: dict[str, dict[str, object]]) -> None:
    """The listeners with their protocols and advertised addresses, each listener's security
    settings, and a refusal of what no listener could serve."""
    addresses = listeners.parse_addresses(properties.get("listeners", "") or
                                          "PLAINTEXT://127.0.0.1:9092")
    protocols = dict(listeners.DEFAULT_PROTOCOL_MAP)
    if "listener.security.protocol.map" in properties:
        protocols = listeners.parse_protocol_map(properties["listener.security.protocol.map"])
    advertised = properties.get("advertised.listeners")
    config.listeners, config.advertised = listeners.resolve(
        addresses, protocols, listeners.parse_addresses(advertised) if advertised else None)
    unknown = sorted(set(per_listener) - set(addresses))
    if unknown:
        raise ValueError(f"listener.name.{unknown[0].lower()}.*: no listener is named "
                         f"{unknown[0]}")
    config.listener_security = {name: replace(config.security, **fields)
                                for name, fields in per_listener.items()}
    for spec in config.listeners:
        if spec.protocol.sasl:
            _check_mechanisms(spec.name, config.security_of(spec.name))


def _check_admin(config: BrokerConfig, properties: dict[str, str]) -> None:
    """https where asked; no anonymous admin API beyond loopback unless asked for by name."""
    config.admin_https = properties.get("admin.listeners", "").strip().lower().startswith(
        "https://")
    endpoint = config.admin_listener
    if endpoint is None or "admin.authentication" in properties or endpoint.on_loopback:
        return
    raise ValueError(f"admin.listeners={properties.get('admin.listeners')} listens beyond "
                     f"loopback: set admin.authentication=basic (the SCRAM users) or bearer "
                     f"(OAUTHBEARER's JWKS), or admin.authentication=none to serve it to anyone")


def _check_mechanisms(listener: str, security: SecurityConfig) -> None:
    mechanisms = security.sasl_enabled_mechanisms
    unserved = [m for m in mechanisms if m not in MECHANISMS]
    if not mechanisms or unserved:
        raise ValueError(f"sasl.enabled.mechanisms for listener {listener}: "
                         f"{', '.join(unserved) or 'none'} cannot be served; CommitGate serves "
                         f"{', '.join(MECHANISMS)} (Kafka's default is GSSAPI: set it)")


def load(config_file: Path | None, overrides: list[str],
         defaults: dict[str, str] | None = None) -> BrokerConfig:
    """``defaults`` (the environment's settings), then the file's, then ``overrides``."""
    properties = dict(defaults or {})
    properties.update(parse_properties(config_file.read_text()) if config_file else {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--override takes KEY=VALUE, got {item!r}")
        properties[key.strip()] = value.strip()
    return broker_config(properties)


def describe() -> str:
    return "\n".join(f"{k}: {s.help}" for k, s in SETTINGS.items())
