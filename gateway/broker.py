"""Broker state shared by every handler: the store, the settings and the broker's identity.

One broker leads every partition today; leadership and the high watermark are still explicit
here (``leader_of``, ``high_watermark``) so that replication can later change them in one place.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from commitgate.engine import MessageStore, StoreStatus
from commitgate.engine.status import AppendResult
from commitgate.engine.topic_table import TopicRecord
from commitgate.gateway.broker_configs import BrokerConfigs
from commitgate.gateway.cluster_meta import cluster_id
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.endpoint import Endpoint
from commitgate.gateway.fetch_waiters import FetchWaiters
from commitgate.gateway.groups.coordinator import GroupCoordinator
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from commitgate.gateway.network_stats import NetworkStats
from commitgate.gateway.peer_log import PeerLog
from commitgate.gateway.producer_ids import ProducerIdAllocator
from commitgate.gateway.producer_snapshot_service import ProducerSnapshotService
from commitgate.gateway.producer_state import ProducerStateManager
from commitgate.gateway.quotas.manager import QuotaManager
from commitgate.gateway.quotas.store import ClientQuotaStore
from commitgate.gateway.request_metrics import RequestMetrics
from commitgate.gateway.security.acl_store import AclStore
from commitgate.gateway.security.authorizer import Authorizer
from commitgate.gateway.security.scram_store import ScramStore
from commitgate.gateway.transactions.coordinator import TransactionCoordinator
from commitgate.gateway.transactions.markers import MarkerWriter
from commitgate.gateway.udp_stats import UdpStats
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import control_type, read_header

log = logging.getLogger(__name__)

LEADER_EPOCH = 0
MAX_MESSAGE_BYTES = "max.message.bytes"

STORE_ERRORS = {
    StoreStatus.OK: ErrorCode.NONE,
    StoreStatus.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    StoreStatus.INVALID_TOPIC: ErrorCode.INVALID_TOPIC_EXCEPTION,
    StoreStatus.INVALID_PARTITIONS: ErrorCode.INVALID_PARTITIONS,
    StoreStatus.TOPIC_ALREADY_EXISTS: ErrorCode.TOPIC_ALREADY_EXISTS,
    StoreStatus.PARTITION_LIMIT: ErrorCode.POLICY_VIOLATION,  # KIP-578's limit; see create_topics
    StoreStatus.ENTRY_TOO_LARGE: ErrorCode.RECORD_LIST_TOO_LARGE,
    StoreStatus.OFFSET_OUT_OF_RANGE: ErrorCode.OFFSET_OUT_OF_RANGE,
    StoreStatus.DISK_ERROR: ErrorCode.KAFKA_STORAGE_ERROR,
    StoreStatus.FLUSH_TIMEOUT: ErrorCode.REQUEST_TIMED_OUT,
    StoreStatus.STORE_CLOSED: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    StoreStatus.INTERNAL_ERROR: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@dataclass
class Node:
    node_id: int
    endpoints: dict[str, Endpoint]  # advertised, by listener name
    rack: str | None = None

    def endpoint(self, listener: str) -> Endpoint:
        """Where a client that came in on ``listener`` reaches this node."""
        return self.endpoints[listener]


class Broker:
    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.node = Node(config.node_id, {spec.name: config.advertised_endpoint(spec.name)
                                          for spec in config.listeners})
        self.cluster_id = cluster_id(config.store.data_dir, config.node_id)
        self.fetch_waiters = FetchWaiters()
        self.network = NetworkStats()  # the listener's and connections' counters
        self.metrics = RequestMetrics()  # per API and per topic, for /metrics
        self.udp = UdpStats()  # the UDP ingest's counters (gateway/udp_ingest.py)
        # what clients sent wrong, rate-limited per address (connections, Produce refusals)
        self.peer_log = PeerLog(logging.getLogger("commitgate.clients"), self.network)
        self.producer_ids = ProducerIdAllocator(config.store.data_dir / "broker" / "producer_ids")
        self.producer_ids.load()
        self.producers = ProducerStateManager()
        self.producer_snapshots = ProducerSnapshotService(
            config.store.data_dir / "broker" / "producer_state", self.producers, store,
            interval_ms=config.producer_snapshot_interval_ms,
            expiration_ms=config.producer_id_expiration_ms)
        self.producer_snapshots.restore()
        store.before_segment_delete.append(self.producer_snapshots.round)
        self.configs = BrokerConfigs(config,
                                     config.store.data_dir / "broker" / "dynamic_configs.json")
        self.configs.load()
        quotas = ClientQuotaStore(config.store.data_dir / "broker" / "client_quotas.json")
        quotas.load()
        self.quotas = QuotaManager(quotas, config.quota_window_num,
                                   config.quota_window_size_seconds)
        self.scram = ScramStore(config.store.data_dir / "broker")  # SASL's users
        self.acls = AclStore(config.store.data_dir / "broker")
        self.authorizer = Authorizer(self.acls, bool(config.authorizer_class_name),
                                     config.super_users, config.allow_everyone_if_no_acl_found)
        store.add_dispatch_listener(self.fetch_waiters.on_dispatch)
        self.groups = GroupCoordinator(config, store)
        self.transactions = TransactionCoordinator(config, store, self.producer_ids,
                                                   self.groups.topic.partition_for)
        self.transactions.write_markers = MarkerWriter(store, self.producers, self.groups.offsets)
        store.retention.compactor.stable_end = self.last_stable_offset
        store.retention.compactor.aborted_batch = self.aborted_batch
        self.groups.topic.appended = self._offsets_appended

    # ---- topics ---------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicRecord | None:
        return self.store.topic(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        return self.store.table.by_id(str(topic_id))

    async def auto_create(self, name: str) -> ErrorCode:
        """Create ``name`` with the default partition count when auto-creation is on (within
        max.broker.partitions). Internal topics come in their coordinator's shape or not at
        all, as in Kafka's AutoTopicCreationManager."""
        if not self.config.auto_create_topics:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if name == OFFSETS_TOPIC:
            return STORE_ERRORS[self.groups.topic.ensure()]
        if name == TRANSACTION_STATE_TOPIC:
            return STORE_ERRORS[self.transactions.log.ensure()]
        result = await self.store.create_topic_off_loop(
            name, self.config.num_partitions, max_partitions=self.config.max_broker_partitions)
        if result.status is StoreStatus.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        if result.status is not StoreStatus.OK:
            log.info("auto-creating topic %r refused: %s", name, result.error)
        return STORE_ERRORS[result.status]

    def health(self) -> dict[str, object]:
        """The broker's health for an admin endpoint: the store offline or not, and every
        supervised background task (store and broker alike) with its state and last error."""
        return self.store.health()

    def max_message_bytes(self, topic: TopicRecord) -> int:
        value = topic.configs.get(MAX_MESSAGE_BYTES)
        return int(value) if value is not None else self.config.message_max_bytes

    # ---- partitions (one broker: it leads everything) ---------------------------------------------

    def leader_of(self, topic: str, partition: int) -> int:
        return self.node.node_id

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.store.log_end_offset(topic, partition)

    def last_stable_offset(self, topic: TopicRecord, partition: int) -> int:
        """Where read_committed readers stop: the first offset of the oldest open
        transaction in the partition, else the high watermark."""
        end = self.high_watermark(topic.name, partition)
        return self.producers.txns.stable_offset((topic.topic_id, partition), end)

    def _offsets_appended(self, partition: int, body: bytes, result: AppendResult) -> None:
        """The group coordinator's transactional offsets and markers count in the producer
        state of their ``__consumer_offsets`` partition, as produced batches do."""
        topic = self.store.topic(OFFSETS_TOPIC)
        header = read_header(body)
        if topic is not None and header.is_transactional:
            self.producers.record(topic.topic_id, partition, header, result.base_offset,
                                  header.max_timestamp, result.phy_end,
                                  control_type(body) if header.is_control else None)

    def aborted_batch(self, topic: TopicRecord, partition: int, body: memoryview) -> bool:
        """Whether a stored batch belongs to an aborted transaction (the compactor drops
        those records and never lets them replace an older value of their key)."""
        header = read_header(body)
        return header.is_transactional and not header.is_control and \
            self.producers.txns.is_aborted((topic.topic_id, partition), header.producer_id,
                                           header.base_offset)

    def nodes(self) -> list[Node]:
        return [self.node]
