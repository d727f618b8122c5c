"""UDP ingest against a real broker subprocess: datagrams from a local sender land in topics
exactly once and in order, keyed ones on murmur2's partition, bad ones are counted and
dropped, and SIGTERM appends what was read but not yet batched."""
from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.partitioner.default import murmur2

from commitgate.bench.udp import free_udp_port, send_paced, udp_counts, wait_appended
from commitgate.launcher import BrokerProcess

RATE = 10_000  # datagrams/s: loopback with an 8 MiB receive buffer does not drop at this rate
WINDOW = 2_000  # the sender stays within this many datagrams of what the broker read
MAX_DATAGRAM = 2_000
DEADLINE_S = 60.0


def _udp_broker(root, **overrides: str) -> BrokerProcess:
    port = free_udp_port()
    broker = BrokerProcess(root / "data", {
        "udp.listeners": f"udp://127.0.0.1:{port}", "udp.topic": "udp-default",
        "num.partitions": "3", **overrides})
    return broker


def _address(broker: BrokerProcess) -> tuple[str, int]:
    host, _, port = broker.overrides["udp.listeners"].removeprefix("udp://").rpartition(":")
    return host, int(port)


@pytest.fixture(scope="module")
def udp_broker(tmp_path_factory):
    broker = _udp_broker(tmp_path_factory.mktemp("udp"), **{
        "udp.format": "tsv", "udp.max.datagram.bytes": str(MAX_DATAGRAM)})
    broker.start()
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def _windowed(broker: BrokerProcess, already: int):
    """Holds the sender back while the broker has read fewer than ``sent - WINDOW``."""
    def ahead(sent: int) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while udp_counts(broker.admin_url).received - already < sent - WINDOW:
            assert time.monotonic() < deadline, "the broker stopped reading datagrams"
            time.sleep(0.01)
    return ahead


def _consume(broker: BrokerProcess, topic: str, partitions: int, want: int
             ) -> dict[int, list[tuple[bytes | None, bytes]]]:
    """(key, value) per partition, read from the start until ``want`` records came."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "udp-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while sum(map(len, got.values())) < want and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                assert message.error() is None, message.error()
                got[message.partition()].append((message.key(), message.value()))
    finally:
        consumer.close()
    return got


def test_100k_datagrams_land_exactly_once_in_send_order(udp_broker):
    before = udp_counts(udp_broker.admin_url)
    count = 100_000
    payloads = (b"\t\t%d" % i for i in range(count))  # udp.topic, no key: round-robin
    elapsed = send_paced(_address(udp_broker), payloads, RATE,
                         _windowed(udp_broker, before.received))
    print(f"sent {count} datagrams in {elapsed:.1f} s: {count / elapsed:,.0f}/s")
    got = _consume(udp_broker, "udp-default", 3, count)
    sequences = {p: [int(value) for _, value in records] for p, records in got.items()}
    everything = sorted(n for seq in sequences.values() for n in seq)
    assert everything == list(range(count))  # each exactly once
    for partition, seq in sequences.items():
        assert seq == sorted(seq), f"partition {partition} is out of send order"
        assert abs(len(seq) - count / 3) <= 1  # round-robin
    after = udp_counts(udp_broker.admin_url)
    assert after.received - before.received == count
    assert after.appended - before.appended == count


def test_keyed_datagrams_land_on_murmur2_partition(udp_broker):
    keys = [b"sensor-%d" % i for i in range(200)]
    send_paced(_address(udp_broker), (b"keyed\t%s\tv" % key for key in keys), RATE)
    got = _consume(udp_broker, "keyed", 3, len(keys))
    placed = {key: partition for partition, records in got.items() for key, _ in records}
    assert sorted(placed) == sorted(keys)
    for key, partition in placed.items():
        assert partition == (murmur2(key) & 0x7FFFFFFF) % 3, key


def test_malformed_and_oversize_datagrams_are_counted_and_dropped(udp_broker):
    before = udp_counts(udp_broker.admin_url)
    good = [b"mixed\t\t%d" % i for i in range(1_000)]
    bad = [b"no tabs %d" % i if i % 2 else b"mixed\t\t" + b"x" * MAX_DATAGRAM
           for i in range(1_000)]
    mixed = [datagram for pair in zip(good, bad) for datagram in pair]
    send_paced(_address(udp_broker), mixed, RATE)
    after = wait_appended(udp_broker.admin_url, before.appended + 1_000 + sum(
        before.dropped.values()) + 1_000)
    assert after.dropped.get("malformed", 0) - before.dropped.get("malformed", 0) == 500
    assert after.dropped.get("oversize", 0) - before.dropped.get("oversize", 0) == 500
    got = _consume(udp_broker, "mixed", 3, 1_000)
    assert sorted(int(v) for records in got.values() for _, v in records) == list(range(1_000))
    # the listener keeps serving, and the log was not flooded (rate-limited per interval)
    send_paced(_address(udp_broker), [b"after\t\tstill here"], RATE)
    assert _consume(udp_broker, "after", 3, 1) != {0: [], 1: [], 2: []}
    warnings = udp_broker.log_path.read_text().count("UDP ingest: malformed")
    assert 1 <= warnings <= 10


def test_sigterm_appends_the_pending_batch_and_what_the_socket_holds(tmp_path):
    broker = _udp_broker(tmp_path, **{"udp.linger.ms": "600000", "num.partitions": "1"})
    sent = [b"pending %d" % i for i in range(2_050)]
    with broker:
        send_paced(_address(broker), sent[:50], RATE)
        deadline = time.monotonic() + DEADLINE_S
        while udp_counts(broker.admin_url).received < 50:  # read from the socket...
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.01)
        assert udp_counts(broker.admin_url).appended == 0  # ...and lingering, not appended
        # on loopback a datagram is in the broker's socket buffer once sendto returns, so these
        # are received before the SIGTERM (2,000 small ones fit in its 8 MiB buffer)
        send_paced(_address(broker), sent[50:], 1e9)
        assert broker.stop() == 0, broker.log_tail()
        assert "UDP ingest stopped: 2050 datagrams received, 2050 records appended" in \
            broker.log_path.read_text()
        broker.start()
        got = _consume(broker, "udp-default", 1, len(sent))
        assert [value for _, value in got[0]] == sent


def test_unknown_topic_without_auto_create_is_dropped(tmp_path):
    broker = _udp_broker(tmp_path, **{"auto.create.topics.enable": "false"})
    with broker:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"x", _address(broker))
        counts = wait_appended(broker.admin_url, 1)
        assert (counts.received, counts.appended) == (1, 0)
        assert counts.dropped == {"unknown_topic": 1}
