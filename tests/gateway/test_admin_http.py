"""The admin HTTP listener of a real broker: /metrics in Prometheus text format whose counters
move by exactly what was produced and fetched, histograms with buckets, JSON errors with 4xx,
/healthz and /readyz (503 once the store is offline), the listener off or its port taken."""
from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.settings import broker_config
from commitgate.launcher import BrokerProcess, free_port
from commitgate.launcher.listening import listening_ports
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import Record, build_batch, decode_records
from tests.gateway.test_faults import FaultyBroker

PRODUCE, FETCH, CREATE_TOPICS = 0, 1, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
DEADLINE_S = 60.0
DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
            "gauge": ("",)}
RECORDS, VALUE_BYTES = 2_000, 200

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(url: str, method: str = "GET", headers: dict[str, str] | None = None
        ) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def scrape(broker: BrokerProcess) -> tuple[list, Samples]:
    """The families as the Prometheus text parser reads them, and every sample by name and
    labels."""
    status, headers, body = get(broker.admin_url + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(body.decode()))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in families for s in family.samples}
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def create(client: WireClient, topic: str) -> None:
    out = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000)).topics[0]
    assert out.error_code == ErrorCode.NONE


def one_record() -> bytes:
    return build_batch([(None, b"v", [], int(time.time() * 1000))])


def produce_raw(client: WireClient, topic: str, records: bytes, partition: int = 0):
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=partition,
                                                                 records=records)])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


def fetch_raw(client: WireClient, topic: str, offset: int, max_bytes: int = 8 << 20):
    request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, session_epoch=-1,
                    topics=[Fetch.FetchTopic(topic=topic, partitions=[Fetch.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    return client.request(FETCH, 12, request).responses[0].partitions[0]


def fetch_all(client: WireClient, topic: str) -> tuple[list[Record], int]:
    """Every record of partition 0 and the bytes of the batches that held them, each batch
    fetched once (a client fetching from the middle of a batch gets all of it again)."""
    records: list[Record] = []
    size = 0
    for _ in range(10_000):
        part = fetch_raw(client, topic, len(records), max_bytes=64 << 10)
        assert part.error_code == ErrorCode.NONE
        if not part.records:
            return records, size
        size += len(part.records)
        records += decode_records(part.records)
    raise AssertionError(f"fetching {topic} did not reach its end")


def test_counters_move_by_exactly_the_records_and_bytes_produced_and_fetched(broker):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    _, before = scrape(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5,
                             batch_size=16_384)
    for n in range(RECORDS):
        producer.send(topic, b"%08d" % n + b"v" * (VALUE_BYTES - 8), partition=0)
    producer.flush()
    producer.close()
    with WireClient(broker.bootstrap) as client:  # batches whose exact bytes are known here
        raw = [build_batch([(None, b"x" * size, [], int(time.time() * 1000))] * count)
               for count, size in ((1, 10), (7, 300))]
        _, mid = scrape(broker)
        for batch in raw:
            assert produce_raw(client, topic, batch).error_code == ErrorCode.NONE
    _, produced = scrape(broker)
    records = RECORDS + 8

    assert value(produced, "commitgate_produce_records_total", topic=topic) == records
    raw_bytes = value(produced, "commitgate_produce_bytes_total", topic=topic) - \
        value(mid, "commitgate_produce_bytes_total", topic=topic)
    assert raw_bytes == sum(map(len, raw))
    produced_bytes = value(produced, "commitgate_produce_bytes_total", topic=topic)
    assert produced_bytes > RECORDS * VALUE_BYTES + sum(map(len, raw))  # and batch headers
    assert value(before, "commitgate_produce_bytes_total", topic=topic) == 0

    with WireClient(broker.bootstrap) as client:
        got, fetched_bytes = fetch_all(client, topic)
    assert [r.offset for r in got] == list(range(records))
    assert fetched_bytes == produced_bytes  # every batch, once
    _, fetched = scrape(broker)
    assert value(fetched, "commitgate_fetch_records_total", topic=topic) == records
    assert value(fetched, "commitgate_fetch_bytes_total", topic=topic) == fetched_bytes


def test_request_latency_histograms_have_buckets_and_count_every_request(broker):
    topic = f"hist-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        create(client, topic)
        for _ in range(5):
            assert produce_raw(client, topic, one_record()).error_code == ErrorCode.NONE
        families, samples = scrape(broker)
    histogram = next(f for f in families if f.name == "commitgate_request_duration_seconds")
    assert histogram.type == "histogram"
    buckets = [(float(s.labels["le"]), s.value) for s in histogram.samples
               if s.name.endswith("_bucket") and s.labels["api"] == "Produce"]
    assert len(buckets) > 10 and buckets[-1][0] == float("inf")
    counts = [count for _, count in buckets]
    assert counts == sorted(counts)  # cumulative
    total = value(samples, "commitgate_request_duration_seconds_count", api="Produce")
    assert buckets[-1][1] == total == value(samples, "commitgate_requests_total", api="Produce")
    assert total >= 5
    assert value(samples, "commitgate_request_duration_seconds_sum", api="Produce") > 0


def test_errors_are_counted_per_api_and_code(broker):
    topic = f"errors-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        create(client, topic)
        assert produce_raw(client, topic, one_record()).error_code == ErrorCode.NONE
        _, before = scrape(broker)
        missing = produce_raw(client, topic, one_record(), partition=7)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch_raw(client, topic, 99).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        _, after = scrape(broker)

    def delta(api: str, code: ErrorCode) -> float:
        labels = {"api": api, "error": code.name, "code": str(int(code))}
        return value(after, "commitgate_request_errors_total", **labels) - \
            value(before, "commitgate_request_errors_total", **labels)

    assert delta("Produce", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == 1
    assert delta("Fetch", ErrorCode.OFFSET_OUT_OF_RANGE) == 1


def test_store_and_connections_are_read_at_scrape_time(broker):
    topic = f"store-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        create(client, topic)
        keyed = build_batch([(b"k", b"v", [], int(time.time() * 1000))])
        assert produce_raw(client, topic, keyed).error_code == ErrorCode.NONE
        _, samples = scrape(broker)
        assert value(samples, "commitgate_connections_open") >= 1
    assert value(samples, "commitgate_connections_accepted_total") >= 1
    assert value(samples, "commitgate_commitlog_size_bytes") > 0
    assert value(samples, "commitgate_commitlog_written_bytes_total") > 0
    assert value(samples, "commitgate_topics") >= 1
    wait_for(lambda: value(scrape(broker)[1], "commitgate_index_files") >= 1,
             "the IndexFile of the keyed record")
    assert value(samples, "commitgate_consumequeue_dispatch_lag_bytes") == 0  # dispatched inline
    assert value(samples, "commitgate_store_offline") == 0
    assert ("commitgate_commitlog_flush_duration_seconds_count", ()) in samples


def test_committed_lag_per_group_partition(broker):
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    for n in range(10):
        producer.send(topic, b"%d" % n, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:  # a simple commit (no membership) at offset 4: 6 records behind the end
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
    finally:
        consumer.close()
    _, samples = scrape(broker)
    assert value(samples, "commitgate_group_lag", group=group, topic=topic, partition="0") == 6
    assert value(samples, "commitgate_group_members", group=group) == 0
    assert value(samples, "commitgate_groups", type="classic", state="Empty") >= 1


def test_the_grafana_dashboard_queries_only_metrics_the_broker_exposes(tmp_path):
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queried = {name for panel in panels for target in panel.get("targets", ())
               for name in re.findall(r"\b(?:commitgate|process)_[a-z_]+", target["expr"])}
    assert len(queried) > 25
    with BrokerProcess(tmp_path / "data", {"flush.disk.type": "SYNC_FLUSH"}) as sync_flush:
        families, _ = scrape(sync_flush)  # SYNC_FLUSH: the group commit's histogram too
    exposed = {family.name + suffix for family in families
               for suffix in SUFFIXES.get(family.type, ("",))}
    assert queried <= exposed, queried - exposed


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/no/such/path", 404),
    ("POST", "/metrics", 405),
    ("DELETE", "/readyz", 405),
    ("GET", "/metrics?bogus=1", 400),
    ("GET", "/v1/query", 400),  # no topic
    ("GET", "/v1/query?topic=t&max=lots", 400),
])
def test_bad_requests_get_4xx_with_a_json_error(broker, method, path, status):
    got, headers, body = get(broker.admin_url + path, method)
    assert got == status
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["error"]
    if status == 405:
        assert "GET" in headers["Allow"]


def test_openmetrics_when_the_scraper_asks_for_it(broker):
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    status, headers, body = get(broker.admin_url + "/metrics", headers={"Accept": accept})
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in openmetrics_families(body.decode())}
    assert families["commitgate_request_duration_seconds"].type == "histogram"
    assert families["commitgate_requests"].type == "counter"


def test_metrics_name_filter(broker):
    status, _, body = get(broker.admin_url + "/metrics?name[]=commitgate_topics")
    assert status == 200
    families = list(text_string_to_metric_families(body.decode()))
    assert [f.name for f in families] == ["commitgate_topics"]


def test_healthz_and_readyz(broker):
    status, _, body = get(broker.admin_url + "/healthz")
    assert (status, json.loads(body)["status"]) == (200, "up")
    status, _, body = get(broker.admin_url + "/readyz")
    ready = json.loads(body)
    assert (status, ready["status"], ready["reasons"]) == (200, "ready", [])
    assert ready["offline"] is False and ready["tasks"]["admin-http"]["state"] == "running"


def test_readyz_is_503_while_the_store_is_offline(tmp_path, monkeypatch):
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("COMMITGATE_FAULTS", str(faults))
    broker = FaultyBroker(tmp_path / "data", {"flush.interval.ms": "20"}).start()
    try:
        with WireClient(broker.bootstrap) as client:
            create(client, "t")
            assert produce_raw(client, "t", one_record()).error_code == ErrorCode.NONE
            (faults / "fdatasync-commitlog").touch()
            produce_raw(client, "t", one_record())  # its flush fails
        wait_for(lambda: get(broker.admin_url + "/readyz")[0] == 503, "/readyz to say 503")
        _, _, body = get(broker.admin_url + "/readyz")
        answer = json.loads(body)
        assert answer["status"] == "not ready" and answer["offline"] is True
        assert any("offline" in reason and "fdatasync" in reason for reason in answer["reasons"])
        assert get(broker.admin_url + "/healthz")[0] == 200  # the process is still up
        _, samples = scrape(broker)
        assert value(samples, "commitgate_store_offline") == 1
    finally:
        broker.kill()


def test_the_admin_listener_is_on_its_own_port_or_off(broker, tmp_path):
    assert listening_ports(broker.process.pid) == {broker.port, broker.admin_port}
    with BrokerProcess(tmp_path / "data", {"admin.listeners": ""}) as off:
        assert listening_ports(off.process.pid) == {off.port}  # only Kafka's
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", off.admin_port), timeout=5).close()
        with WireClient(off.bootstrap) as client:  # the broker serves Kafka clients as ever
            create(client, "t")
            assert produce_raw(client, "t", one_record()).error_code == ErrorCode.NONE


def test_a_taken_admin_port_fails_the_start_clearly(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = BrokerProcess(tmp_path / "data",
                               {"admin.listeners": f"http://127.0.0.1:{port}"})
        with pytest.raises(RuntimeError, match="exited with 1"):
            broker.start()
    log = broker.log_path.read_text()
    assert f"admin.listeners=http://127.0.0.1:{port} cannot listen" in log
    assert "in use" in log and "Traceback" not in log


@pytest.mark.parametrize("text", ["127.0.0.1:9644", "ftp://127.0.0.1:9644",
                                  "http://127.0.0.1", "http://127.0.0.1:9644/metrics",
                                  "http://a:1,http://b:2", f"http://127.0.0.1:{1 << 16}",
                                  "https://127.0.0.1:0"])
def test_admin_listeners_takes_one_http_host_port(text):
    with pytest.raises(ValueError, match="admin.listeners.*http://HOST:PORT or https://HOST:PORT"):
        broker_config({"admin.listeners": text})


def test_admin_listeners_values():
    assert broker_config({}).admin_listener.port == 9644
    assert broker_config({"admin.listeners": ""}).admin_listener is None
    port = free_port()
    endpoint = broker_config({"admin.listeners": f"http://0.0.0.0:{port}",
                              "admin.authentication": "basic"}).admin_listener
    assert (endpoint.host, endpoint.port) == ("0.0.0.0", port)
