"""Broker settings: the listener, Kafka's broker-level defaults, and the store's own settings."""
from __future__ import annotations

from dataclasses import dataclass, field

from commitgate.engine.config import StoreConfig
from commitgate.gateway.endpoint import Endpoint
from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.listeners import (
    ListenerSpec,
    SecurityProtocol,
    default_advertised,
)

DEFAULT_PORT = 9092
DEFAULT_ADMIN_PORT = 9644  # Redpanda's admin API port


@dataclass
class BrokerConfig:
    # listeners by security protocol; advertised addresses by listener name (the default: the
    # listener's own, 127.0.0.1 and wildcards shown as localhost); gateway/security/listeners.py
    listeners: tuple[ListenerSpec, ...] = field(default_factory=lambda: (ListenerSpec(
        "PLAINTEXT", SecurityProtocol.PLAINTEXT, Endpoint("127.0.0.1", DEFAULT_PORT)),))
    advertised: dict[str, Endpoint] = field(default_factory=dict)
    # ssl.* and sasl.* settings, and each listener's own (listener.name.NAME.*) where given
    security: SecurityConfig = field(default_factory=SecurityConfig)
    listener_security: dict[str, SecurityConfig] = field(default_factory=dict)
    # authorization (gateway/security/authorizer.py): on with any authorizer.class.name
    authorizer_class_name: str = ""
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    node_id: int = 1
    num_partitions: int = 1  # partitions of auto-created topics and CreateTopics with -1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1  # accepted, not acted on (one replica); KIP-966's cluster value
    auto_create_topics: bool = True
    message_max_bytes: int = 1_048_588  # Kafka's default max.message.bytes for a batch
    socket_request_max_bytes: int = 104_857_600
    # memory of all requests read and not yet answered; reading waits while it is taken
    queued_max_request_bytes: int = 536_870_912
    max_connections: int = 2_147_483_647  # Kafka's defaults: no limit
    max_connections_per_ip: int = 2_147_483_647
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600_000
    quota_window_num: int = 11  # Kafka's client quota windows (gateway/quotas/)
    quota_window_size_seconds: int = 1
    max_broker_partitions: int = 100_000  # KIP-578's name: partitions of all topics together
    delete_topic_enable: bool = True
    static_properties: dict[str, str] = field(default_factory=dict)  # as given at start
    producer_id_expiration_ms: int = 86_400_000  # Kafka's producer.id.expiration.ms
    producer_snapshot_interval_ms: int = 10_000
    # the group coordinator's, with Kafka's defaults
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    consumer_group_heartbeat_interval_ms: int = 5_000  # KIP-848 groups (group.consumer.*)
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    # the transaction coordinator's, with Kafka's defaults
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_interval_ms: int = 10_000
    transaction_expire_interval_ms: int = 3_600_000
    # the admin HTTP API and /metrics (admin.listeners); None: off
    admin_listener: Endpoint | None = Endpoint("127.0.0.1", DEFAULT_ADMIN_PORT)
    admin_https: bool = False  # admin.listeners=https://...: TLS with the ssl.keystore.* key
    admin_authentication: str = "none"  # none, basic (SCRAM users) or bearer (a JWT)
    # UDP ingest (udp.*; docs/architecture.md "UDP ingest"); udp_listener None: off
    udp_listener: Endpoint | None = None
    udp_topic: str = ""  # the topic of datagrams that do not name one
    udp_format: str = "raw"  # raw, tsv or json (gateway/udp_framing.py)
    udp_linger_ms: int = 5  # a datagram waits at most this long for its batch to fill
    udp_batch_bytes: int = 262_144  # a partition's batch is appended once this big
    udp_receive_buffer_bytes: int = 4_194_304  # SO_RCVBUF (capped by net.core.rmem_max)
    udp_max_datagram_bytes: int = 65_507  # larger datagrams are dropped (oversize)
    store: StoreConfig = field(default_factory=StoreConfig)

    @property
    def listener(self) -> Endpoint:
        """The first listener's address (where health checks and launchers look)."""
        return self.listeners[0].endpoint

    def advertised_endpoint(self, listener: str) -> Endpoint:
        """What clients that connected to ``listener`` are told (Metadata, FindCoordinator)."""
        spec = next(s for s in self.listeners if s.name == listener)
        return self.advertised.get(listener) or default_advertised(spec.endpoint)

    def security_of(self, listener: str) -> SecurityConfig:
        return self.listener_security.get(listener, self.security)
