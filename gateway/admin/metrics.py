"""The broker's Prometheus metrics: the counters the request path bumps
(``gateway/request_metrics.py``, ``network_stats.py``, ``udp_stats.py``) and what the store,
the listener and the group coordinator already know, read when ``/metrics`` is scraped.

``BrokerCollector`` turns them and the broker's state into metric families at scrape time, into
a CollectorRegistry of the broker's own (not prometheus-client's global one, which anything
imported may add to).
"""
from __future__ import annotations

import collections
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from commitgate.engine.group_commit_service import GroupCommitService
from commitgate.engine.histogram import Histogram
from commitgate.gateway.broker import Broker
from commitgate.protocol.errors import ErrorCode

PREFIX = "commitgate"


def registry(broker: Broker) -> CollectorRegistry:
    """The broker's registry: its own metrics and the process's (CPU, memory, descriptors).
    Families are named by a first collection (auto_describe), for ``name[]`` to find them."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(BrokerCollector(broker))
    ProcessCollector(registry=registry)
    return registry


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._traffic()
        yield from self._requests()
        yield from self._network()
        yield from self._store()
        yield from self._groups()
        yield from self._producers()
        yield from self._udp()
        yield from self._quotas()

    def _traffic(self) -> Iterator[Metric]:
        metrics = self.broker.metrics
        metrics.forget_topics(self.broker.store.table.topics)
        for way, table, what in (("produce", metrics.produced, "appended by Produce"),
                                 ("fetch", metrics.fetched, "returned by Fetch")):
            size = CounterMetricFamily(f"{PREFIX}_{way}_bytes", f"Bytes of batches {what}",
                                       labels=["topic"])
            records = CounterMetricFamily(
                f"{PREFIX}_{way}_records", f"Records in batches {what} (the offsets they span)",
                labels=["topic"])
            for topic, (nbytes, count) in sorted(table.items()):
                size.add_metric([topic], nbytes)
                records.add_metric([topic], count)
            yield size
            yield records

    def _requests(self) -> Iterator[Metric]:
        metrics = self.broker.metrics
        requests = CounterMetricFamily(f"{PREFIX}_requests", "Requests answered, per API",
                                       labels=["api"])
        latency = HistogramMetricFamily(
            f"{PREFIX}_request_duration_seconds",
            "From a request's last byte read to its response written, per API", labels=["api"])
        for api, histogram in sorted(metrics.latency.items()):
            requests.add_metric([api], histogram.count)
            latency.add_metric([api], _buckets(histogram), histogram.total)
        errors = CounterMetricFamily(
            f"{PREFIX}_request_errors",
            "Error codes answered, per API: the response's top-level code, and each partition's "
            "for Produce and Fetch", labels=["api", "error", "code"])
        for (api, code), count in sorted(metrics.errors.items()):
            errors.add_metric([api, _error_name(code), str(code)], count)
        yield from (requests, latency, errors)

    def _network(self) -> Iterator[Metric]:
        net = self.broker.network
        yield GaugeMetricFamily(f"{PREFIX}_connections_open", "Kafka connections open",
                                value=net.connections_open)
        yield CounterMetricFamily(f"{PREFIX}_connections_accepted", "Kafka connections accepted",
                                  value=net.connections_accepted)
        refused = CounterMetricFamily(f"{PREFIX}_connections_closed",
                                      "Kafka connections the broker closed, by reason",
                                      labels=["reason"])
        refused.add_metric(["max.connections.per.ip"], net.connections_refused_per_ip)
        refused.add_metric(["connections.max.idle.ms"], net.connections_closed_idle)
        yield refused
        yield CounterMetricFamily(
            f"{PREFIX}_accept_paused", "Times max.connections held new clients in the backlog",
            value=net.accept_paused)
        bad = CounterMetricFamily(f"{PREFIX}_bad_requests",
                                  "Requests that closed their connection, by reason",
                                  labels=["reason"])
        bad.add_metric(["oversized"], net.oversized_frames)
        bad.add_metric(["malformed"], net.malformed_requests)
        bad.add_metric(["unsupported"], net.unsupported_requests)
        yield bad
        yield CounterMetricFamily(f"{PREFIX}_tls_handshakes_failed",
                                  "TLS handshakes that failed: plaintext clients on TLS "
                                  "listeners, untrusted certificates, timeouts",
                                  value=net.tls_handshakes_failed)
        yield CounterMetricFamily(f"{PREFIX}_sasl_authentications",
                                  "SASL logins and re-authentications that succeeded",
                                  value=net.sasl_authentications)
        yield CounterMetricFamily(f"{PREFIX}_sasl_authentication_failures",
                                  "SASL logins refused (SASL_AUTHENTICATION_FAILED)",
                                  value=net.sasl_authentication_failures)
        yield CounterMetricFamily(f"{PREFIX}_produce_refused",
                                  "Partitions' record sets refused by Produce validation",
                                  value=net.produce_refused)
        yield GaugeMetricFamily(f"{PREFIX}_queued_request_bytes",
                                "Bytes of requests read and not yet answered "
                                "(queued.max.request.bytes)", value=net.queued_request_bytes)
        yield CounterMetricFamily(f"{PREFIX}_request_memory_waits",
                                  "Times a connection waited for queued.max.request.bytes",
                                  value=net.request_memory_waits)

    def _store(self) -> Iterator[Metric]:
        store = self.broker.store
        log = store.commit_log
        segments = log.queue.files
        yield GaugeMetricFamily(f"{PREFIX}_store_offline",
                                "1 while the store refuses writes after an I/O error",
                                value=int(bool(store.offline_reason)))
        yield GaugeMetricFamily(f"{PREFIX}_topics", "Topics", value=len(store.table.topics))
        yield GaugeMetricFamily(f"{PREFIX}_partitions", "Partitions of all topics",
                                value=store.table.partition_count())
        yield GaugeMetricFamily(f"{PREFIX}_commitlog_segments", "CommitLog segment files",
                                value=len(segments))
        yield GaugeMetricFamily(f"{PREFIX}_commitlog_size_bytes",
                                "Bytes of CommitLog segment files on disk (preallocated)",
                                value=len(segments) * log.queue.file_size)
        yield CounterMetricFamily(f"{PREFIX}_commitlog_written_bytes",
                                  "Bytes ever appended to the CommitLog (its end offset)",
                                  value=log.max_offset)
        flush = store.flush_service
        if flush is None:  # not open yet
            return
        yield GaugeMetricFamily(f"{PREFIX}_commitlog_unflushed_bytes",
                                "CommitLog bytes written but not yet fdatasync'd",
                                value=max(0, log.max_offset - flush.flushed_offset))
        yield _histogram(f"{PREFIX}_commitlog_flush_duration_seconds",
                         "fdatasync rounds of the CommitLog", flush.flush_seconds)
        if isinstance(flush, GroupCommitService):  # SYNC_FLUSH
            yield _histogram(f"{PREFIX}_group_commit_size",
                             "SYNC_FLUSH: appends answered by one group-commit fdatasync",
                             flush.commit_sizes)
        yield GaugeMetricFamily(f"{PREFIX}_consumequeue_dispatch_lag_bytes",
                                "CommitLog bytes written but not yet in their ConsumeQueues",
                                value=max(0, log.max_offset - store.dispatcher.dispatched_offset))
        yield GaugeMetricFamily(f"{PREFIX}_index_lag_bytes",
                                "CommitLog bytes dispatched but not yet in the IndexFiles",
                                value=store.index.lag_bytes)
        yield GaugeMetricFamily(f"{PREFIX}_index_files", "IndexFiles (keys)",
                                value=len(store.index.service.files))

    def _groups(self) -> Iterator[Metric]:
        coordinator = self.broker.groups
        groups = GaugeMetricFamily(f"{PREFIX}_groups", "Consumer groups, by type and state",
                                   labels=["type", "state"])
        for (kind, state), count in sorted(collections.Counter(
                (g.type, g.state) for g in coordinator.list([], [])).items()):
            groups.add_metric([kind, state], count)
        yield groups
        members = GaugeMetricFamily(f"{PREFIX}_group_members", "Members of each consumer group",
                                    labels=["group"])
        for table in (coordinator.groups, coordinator.consumer_groups):
            for group_id, group in sorted(table.items()):
                members.add_metric([group_id], len(group.members))
        yield members
        yield self._lag(coordinator.offsets.table)

    def _lag(self, table: dict) -> Metric:
        """The log end offset minus the committed offset, per group and partition."""
        lag = GaugeMetricFamily(f"{PREFIX}_group_lag",
                                "Records between a group's committed offset and the log end",
                                labels=["group", "topic", "partition"])
        store = self.broker.store
        for group_id, offsets in sorted(table.items()):
            for (topic, partition), committed in sorted(offsets.items()):
                end = store.log_end_offset(topic, partition)
                if end >= 0:  # the partition still exists
                    lag.add_metric([group_id, topic, str(partition)],
                                   max(0, end - committed.offset))
        return lag

    def _producers(self) -> Iterator[Metric]:
        entries = self.broker.producers.entries
        yield GaugeMetricFamily(f"{PREFIX}_producer_ids",
                                "Idempotent producer ids with state on the broker",
                                value=len({key[0] for key in entries}))
        yield GaugeMetricFamily(f"{PREFIX}_producer_states",
                                "Idempotent producers' states, one per producer id and partition",
                                value=len(entries))


    def _udp(self) -> Iterator[Metric]:
        """The UDP ingest's counts (zero while udp.listeners is off)."""
        udp = self.broker.udp
        yield CounterMetricFamily(f"{PREFIX}_udp_datagrams_received",
                                  "Datagrams the UDP ingest read", value=udp.received)
        yield CounterMetricFamily(f"{PREFIX}_udp_records_appended",
                                  "Records the UDP ingest appended", value=udp.appended)
        dropped = CounterMetricFamily(f"{PREFIX}_udp_dropped",
                                      "Datagrams or records the UDP ingest dropped, by reason",
                                      labels=["reason"])
        for reason, count in sorted(udp.dropped.items()):
            dropped.add_metric([reason], count)
        yield dropped

    def _quotas(self) -> Iterator[Metric]:
        """Responses throttled by client quotas and their throttle time, per quota and
        client (rates idle for an hour are forgotten, as Kafka's quota sensors)."""
        labels = ["quota", "user", "client_id"]
        count = CounterMetricFamily(f"{PREFIX}_client_throttled_responses",
                                    "Responses throttled by a client quota", labels=labels)
        time_ms = CounterMetricFamily(f"{PREFIX}_client_throttle_time_ms",
                                      "Throttle time given by a client quota, in ms",
                                      labels=labels)
        for key, user, client_id, throttled, throttle_ms in self.broker.quotas.throttle_counts():
            count.add_metric([key, user, client_id], throttled)
            time_ms.add_metric([key, user, client_id], throttle_ms)
        yield count
        yield time_ms


def _buckets(histogram: Histogram) -> list[tuple[str, int]]:
    """Cumulative counts per upper bound, as the text format wants them."""
    out, running = [], 0
    for bound, count in zip((*histogram.bounds, float("inf")), histogram.counts):
        running += count
        out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
    return out


def _histogram(name: str, text: str, histogram: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, text)
    family.add_metric([], _buckets(histogram), histogram.total)
    return family


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:  # a code CommitGate's table lacks
        return "UNKNOWN"
