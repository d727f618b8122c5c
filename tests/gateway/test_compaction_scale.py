"""Compaction at scale, through real clients against a real broker subprocess: 1,000,000 records
over 10,000 keys, then 1,000 tombstones. After cleaning, a consumer from the beginning sees
exactly the last record of each key, once, in offset order, at the offset it was produced at;
the tombstones while ``delete.retention.ms`` keeps them, then not; confluent-kafka,
kafka-python and the Java client (the compat matrix's driver, compat_tests/drivers/java) read
the same; and the CommitLog's disk usage falls far below what was produced.

Timings (produce, until compacted, ...) are printed, never asserted: run with ``-s``."""
from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from commitgate.compat_tests.clients import CLIENTS
from commitgate.compat_tests.contract import DriverProcess
from commitgate.engine.paths import parse_offset_file_name
from commitgate.launcher import BrokerProcess

TOPIC = "scale-table"
RECORDS, KEYS, TOMBSTONES = 1_000_000, 10_000, 1_000
SEGMENT_BYTES = 2 << 20
JAVA_CLIENTS = ("java-3.9", "java-4.3")
PRODUCE_DEADLINE_S = 600  # 1M records took ~7 s on an idle 2-core machine
CLEAN_DEADLINE_S = 600  # each wait below: a deadline on a condition, never a timed assertion
READ_DEADLINE_S = 180  # one read of the whole partition by one client
REREAD_S = 15  # while waiting, the view is read again at least this often

Row = tuple[int, bytes, bytes | None]  # offset, key, value (None: a tombstone)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("compaction-scale") / "data",
                            {"commitlog.segment.bytes": str(SEGMENT_BYTES),
                             "log.retention.check.interval.ms": "200"})
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


# ---- producing and the model ---------------------------------------------------------------

def _plan(rng: random.Random) -> list[tuple[bytes, bytes | None]]:
    """RECORDS records over KEYS keys (every key at least once), then TOMBSTONES tombstones
    for distinct keys."""
    keys = [b"key-%05d" % i for i in range(KEYS)]
    picks = list(range(KEYS)) + [rng.randrange(KEYS) for _ in range(RECORDS - KEYS)]
    rng.shuffle(picks)
    plan: list[tuple[bytes, bytes | None]] = [
        (keys[k], b"value-%07d-%s" % (i, b"x" * 16)) for i, k in enumerate(picks)]
    return plan + [(keys[k], None) for k in rng.sample(range(KEYS), TOMBSTONES)]


def _produce(bootstrap: str, plan: list[tuple[bytes, bytes | None]]) -> dict[int, tuple]:
    """Produces ``plan`` to partition 0 (confluent-kafka, batched, acks=all); returns each
    acknowledged record {offset: (key, value)}."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384,
                         "message.timeout.ms": PRODUCE_DEADLINE_S * 1000})
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    errors = []

    def on_delivery(error, message):
        if error is not None:
            errors.append(error)
        else:
            acked[message.offset()] = (message.key(), message.value())

    for n, (key, value) in enumerate(plan):
        while True:
            try:
                producer.produce(TOPIC, value, key, partition=0, on_delivery=on_delivery)
                break
            except BufferError:  # the client's queue is full: let deliveries drain it
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    assert producer.flush(PRODUCE_DEADLINE_S) == 0
    assert not errors, errors[:5]
    assert len(acked) == len(plan)
    return acked


def _view(model: dict[int, tuple], tombstones: bool) -> list[Row]:
    """What a consumer from the beginning must see once cleaned: the last record of each key,
    in offset order (its tombstone, or nothing for that key when ``tombstones`` is False)."""
    last: dict[bytes, Row] = {}
    for offset, (key, value) in sorted(model.items()):
        last[key] = (offset, key, value)
    return sorted(row for row in last.values() if tombstones or row[2] is not None)


# ---- reading the partition from the beginning ------------------------------------------------

def _end_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-watermarks"})
    try:
        return consumer.get_watermark_offsets(ConfluentPartition(TOPIC, 0), timeout=30)[1]
    finally:
        consumer.close()


def _read_confluent(bootstrap: str) -> list[Row]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-confluent",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        end = consumer.get_watermark_offsets(ConfluentPartition(TOPIC, 0), timeout=30)[1]
        consumer.assign([ConfluentPartition(TOPIC, 0, 0)])
        rows: list[Row] = []
        deadline = time.monotonic() + READ_DEADLINE_S
        while time.monotonic() < deadline:
            messages = consumer.consume(10_000, 1)
            for message in messages:
                assert message.error() is None, message.error()
                rows.append((message.offset(), message.key(), message.value()))
            if rows and rows[-1][0] >= end - 1:
                break
        return rows
    finally:
        consumer.close()


def _read_kafka_python(bootstrap: str) -> list[Row]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(TOPIC, 0)
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        rows: list[Row] = []
        deadline = time.monotonic() + READ_DEADLINE_S
        while consumer.position(partition) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                rows += [(r.offset, r.key, r.value) for r in records]
        return rows
    finally:
        consumer.close()


class JavaReader:
    """The compat matrix's Java driver (ClientDriver.java, compiled with javac into a temporary
    directory by compat_tests.clients), reading the partition from the earliest offset."""

    def __init__(self, name: str, bootstrap: str, workdir) -> None:
        spec = next(client for client in CLIENTS if client.name == name)
        self.name = name
        self.driver = DriverProcess(spec.prepare(workdir)(bootstrap)).start()

    def read(self, count: int) -> list[Row]:
        """The first ``count`` records from the earliest offset, then whatever else arrives
        within a short wait (nothing, when the view is right)."""
        self.driver.call("consumer_open", 60, name="scale", topic=TOPIC, partitions=[0],
                         group=None, start="earliest", read_committed=False)
        try:
            rows = self._poll(count, READ_DEADLINE_S * 1000)
            return rows + self._poll(1, 2000)
        finally:
            self.driver.call("consumer_close", 60, name="scale")

    def _poll(self, count: int, max_ms: int) -> list[Row]:
        answer = self.driver.call("poll", 60 + max_ms / 1000, name="scale", count=count,
                                  max_ms=max_ms)
        return [(r["offset"], bytes.fromhex(r["key"]),
                 None if r["value"] is None else bytes.fromhex(r["value"]))
                for r in answer["records"]]

    def close(self) -> None:
        self.driver.stop()


# ---- what the broker reports and holds on disk --------------------------------------------------

def _partition_size(admin: KafkaAdminClient) -> int:
    """The partition's bytes as DescribeLogDirs reports them (the CommitLog entries of its
    batches from its log start)."""
    (entry,) = admin.describe_log_dirs({TOPIC: [0]})
    (log_dir,) = entry["log_dirs"]
    (topic,) = log_dir["topics"]
    (partition,) = topic["partitions"]
    return partition["partition_size"]


def _commit_log_bytes(broker: BrokerProcess) -> int:
    """Disk the CommitLog takes: its segment files (pre-allocated whole) x the segment size."""
    files = [path for path in (broker.data_dir / "commitlog").iterdir()
             if parse_offset_file_name(path.name) is not None]
    return len(files) * SEGMENT_BYTES


def _wait_for_view(broker: BrokerProcess, admin: KafkaAdminClient, expected: list[Row],
                   what: str) -> float:
    """Waits until a confluent-kafka read from the beginning equals ``expected``, reading again
    each time the partition's reported size has settled at a new value (or REREAD_S passed);
    returns the wait."""
    started = time.monotonic()
    deadline = started + CLEAN_DEADLINE_S
    view: list[Row] = []
    read_at_size, read_at, previous = None, 0.0, None
    while time.monotonic() < deadline:
        size = _partition_size(admin)
        settled = size == previous and size != read_at_size  # a new size, unchanged since
        if settled or time.monotonic() - read_at > REREAD_S:
            view, read_at_size, read_at = _read_confluent(broker.bootstrap), size, time.monotonic()
            if view == expected:
                return time.monotonic() - started
        previous = size
        time.sleep(0.5)
    raise AssertionError(f"{what}: not reached within {CLEAN_DEADLINE_S}s: "
                         f"{_difference(view, expected)}; partition size {previous}, "
                         f"broker log:\n{broker.log_tail(40)}")


def _difference(view: list[Row], expected: list[Row]) -> str:
    """A short account of how ``view`` differs from ``expected``."""
    if view == expected:
        return "equal"
    offsets = [row[0] for row in view]
    first = next((i for i, (a, b) in enumerate(zip(view, expected, strict=False)) if a != b),
                 min(len(view), len(expected)))
    return (f"{len(view)} records read, {len(expected)} expected, "
            f"{len(offsets) - len(set(offsets))} offsets repeated, "
            f"in order: {offsets == sorted(offsets)}; first difference at index {first}: "
            f"read {view[first:first + 3]}, expected {expected[first:first + 3]}")


def _assert_same(name: str, view: list[Row], expected: list[Row]) -> None:
    assert view == expected, f"{name}: {_difference(view, expected)}"


def _wait_for_disk(broker: BrokerProcess, bound: int) -> tuple[float, int]:
    started = time.monotonic()
    deadline = started + CLEAN_DEADLINE_S
    used = _commit_log_bytes(broker)
    while used > bound and time.monotonic() < deadline:
        time.sleep(0.5)
        used = _commit_log_bytes(broker)
    return time.monotonic() - started, used


# ---- the test --------------------------------------------------------------------------------

@pytest.mark.timeout(PRODUCE_DEADLINE_S + 4 * CLEAN_DEADLINE_S + 12 * READ_DEADLINE_S)
def test_a_million_records_compact_to_the_last_value_of_each_key(broker, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    # max.compaction.lag.ms: the part written after the last cleaning that ran beside the
    # producer may stay below the dirty ratio; it is cleaned 2 s after it was written anyway
    admin.create_topics([NewTopic(TOPIC, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
        "max.compaction.lag.ms": "2000", "delete.retention.ms": str(10**12)})])[TOPIC].result(30)
    javas: list[JavaReader] = []
    try:
        for name in JAVA_CLIENTS:  # javac before the clock starts
            javas.append(JavaReader(name, broker.bootstrap, tmp_path / name))
        # 1M records over 10k keys, 1k tombstones, then a record of a new key: the partition's
        # last batch is never cleaned, so it must hold none of the records cleaning decides on.
        plan = _plan(random.Random(20_240_601))
        started = time.monotonic()
        model = _produce(broker.bootstrap, plan)
        model.update(_produce(broker.bootstrap, [(b"end-1", b"the end")]))
        produce_s = time.monotonic() - started
        assert sorted(model) == list(range(RECORDS + TOMBSTONES + 1))  # a fresh partition
        payload = sum(len(key) + len(value or b"") for key, value in model.values())
        print(f"\nproduced {len(model):,} records ({payload / 2**20:.1f} MiB of keys and "
              f"values) in {produce_s:.1f}s ({len(model) / produce_s:,.0f} records/s)")

        expected = _view(model, tombstones=True)
        assert len(expected) == KEYS + 1
        assert sum(1 for _, _, value in expected if value is None) == TOMBSTONES
        compacted_s = _wait_for_view(broker, kadmin, expected, "compacted, tombstones kept")
        print(f"compacted to {len(expected):,} records (tombstones kept) {compacted_s:.1f}s "
              f"after the last acknowledgement")
        assert _end_offset(broker.bootstrap) == len(model)  # the log end did not move
        _assert_same("kafka-python", _read_kafka_python(broker.bootstrap), expected)
        for java in javas:
            _assert_same(java.name, java.read(len(expected)), expected)

        # delete.retention.ms=0: the next cleaning drops every tombstone. A cleaning is due
        # only when the dirty share reaches min.cleanable.dirty.ratio (as in Kafka), and one
        # new batch against 10k cleaned records is below 0.01: the ratio goes to 0.
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("delete.retention.ms", "0",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        model.update(_produce(broker.bootstrap, [(b"end-2", b"the very end")]))
        expected = _view(model, tombstones=False)
        assert len(expected) == KEYS - TOMBSTONES + 2
        gone_s = _wait_for_view(broker, kadmin, expected, "tombstones removed")
        print(f"tombstones removed {gone_s:.1f}s after delete.retention.ms=0")
        assert _end_offset(broker.bootstrap) == len(model)
        _assert_same("kafka-python", _read_kafka_python(broker.bootstrap), expected)
        for java in javas:
            _assert_same(java.name, java.read(len(expected)), expected)

        # The CommitLog's disk: a few segments (the live records fit in one; the bound of
        # docs/architecture.md is 2 x live + 3 segments), far below what was produced.
        live = _partition_size(kadmin)
        bound = max(2 * live + 3 * SEGMENT_BYTES, 4 * SEGMENT_BYTES)
        freed_s, used = _wait_for_disk(broker, bound)
        print(f"CommitLog on disk: {used / 2**20:.0f} MiB ({used // SEGMENT_BYTES} segments) "
              f"for {live / 2**20:.2f} MiB live, after {freed_s:.1f}s more; "
              f"{payload / 2**20:.1f} MiB of keys and values were produced")
        assert used <= bound, f"{used} bytes of CommitLog segments, {live} live"
        assert used * 4 <= payload
    finally:
        for java in javas:
            java.close()
        kadmin.close()
