"""Resources a client can take, against a real broker subprocess over raw sockets: memory for
size prefixes with no body, for idle connections and for requests in flight
(queued.max.request.bytes), and Kafka's connection limits (max.connections,
max.connections.per.ip and its overrides, connections.max.idle.ms)."""
from __future__ import annotations

import contextlib
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.peer_log import BURST
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch

PRODUCE, FETCH, API_VERSIONS, CREATE_TOPICS = 0, 1, 18, 19
Produce = messages.get("ProduceRequest").cls
Fetch = messages.get("FetchRequest").cls
Create = messages.get("CreateTopicsRequest").cls
Versions = messages.get("ApiVersionsRequest").cls
MIB = 1 << 20
DEADLINE_S = 60.0


# ---- helpers ------------------------------------------------------------------------------------

@contextlib.contextmanager
def _broker(tmp_path: Path, **overrides: str) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", {"num.partitions": "1", **overrides})
    with process:
        yield process
    assert "Traceback" not in process.log_path.read_text(), process.log_tail()


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _memory(pid: int) -> int:
    """Bytes of memory the process allocated (RssAnon and RssShmem of /proc/<pid>/status):
    its resident set but for the pages of the files it maps, such as the CommitLog's."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines())
    return sum(int(fields[name].split()[0]) for name in ("RssAnon", "RssShmem")) * 1024


def _fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _versions(client: WireClient) -> int:
    return client.request(API_VERSIONS, 3, Versions(client_software_name="t",
                                                    client_software_version="1")).error_code


def _connect(broker: BrokerProcess, timeout_s: float = DEADLINE_S) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=timeout_s)


def _create(client: WireClient, name: str) -> None:
    request = Create(topics=[Create.CreatableTopic(name=name, num_partitions=1,
                                                   replication_factor=1)], timeout_ms=5000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE


def _produce(client: WireClient, topic: str, records: bytes) -> int:
    request = Produce(acks=1, timeout_ms=30_000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0].error_code


def _normal_client_works(broker: BrokerProcess, topic: str) -> None:
    with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
        assert _versions(client) == ErrorCode.NONE
        _create(client, topic)
        batch = bytes(build_batch([(None, b"still serving", [], 1_000)]))
        assert _produce(client, topic, batch) == ErrorCode.NONE


@pytest.fixture(autouse=True)
def _enough_file_descriptors() -> None:
    """2,000 connections take 2,000 descriptors here and as many in the broker, which inherits
    this limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ---- memory -------------------------------------------------------------------------------------

def test_size_prefixes_with_no_body_take_no_memory(tmp_path):
    frame = 32 * MIB
    count = 100
    # no request budget, so that only the allocation as bytes arrive keeps memory down
    with _broker(tmp_path, **{"socket.request.max.bytes": str(frame),
                              "queued.max.request.bytes": "-1"}) as broker:
        pid = broker.process.pid
        _normal_client_works(broker, "warm-up")
        before = _memory(pid)
        sockets = [_connect(broker) for _ in range(count)]
        try:
            for sock in sockets:
                sock.sendall(struct.pack(">i", frame) + b"\0" * 100)
            # the broker read them all before answering a request sent after them
            _normal_client_works(broker, "meanwhile")
            grown = _memory(pid) - before
            assert grown < 16 * MIB, f"{grown / MIB:.1f} MiB for {count} size prefixes"
            assert not any(_closed_by_broker_now(sock) for sock in sockets)
        finally:
            for sock in sockets:
                sock.close()


def _closed_by_broker_now(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def test_idle_connections_cost_a_few_kb_and_give_their_descriptors_back(tmp_path):
    count = 2_000
    with _broker(tmp_path) as broker:
        pid = broker.process.pid
        _normal_client_works(broker, "warm-up")
        fds_before, memory_before = _fds(pid), _memory(pid)
        clients = []
        try:
            for _ in range(count):
                clients.append(WireClient(broker.bootstrap, timeout_s=DEADLINE_S))
            for client in clients:  # each one read a request and wrote a response
                assert _versions(client) == ErrorCode.NONE
            # all answered, so all held (the warm-up's may not have been closed before)
            assert _fds(pid) >= fds_before + count - 1
            per_connection = (_memory(pid) - memory_before) / count
            print(f"\n{per_connection / 1024:.1f} KiB per idle connection")
            assert per_connection < 16 * 1024, f"{per_connection:.0f} bytes per idle connection"
        finally:
            for client in clients:
                client.close()
        _wait(lambda: _fds(pid) <= fds_before + 2, "the broker to close its descriptors")
        _normal_client_works(broker, "after")


def test_requests_in_flight_wait_within_queued_max_request_bytes(tmp_path):
    budget, batch_bytes, connections, per_connection = 4 * MIB, 3 * MIB, 32, 2
    batch = bytes(build_batch([(None, bytes([i]) * (batch_bytes // 4), [], 1_000 + i)
                               for i in range(4)]))
    with _broker(tmp_path, **{"queued.max.request.bytes": str(budget),
                              "message.max.bytes": str(8 * MIB)}) as broker:
        pid = broker.process.pid
        _normal_client_works(broker, "big")
        before = _memory(pid)
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _memory(pid))
                time.sleep(0.005)

        def produce(_: int) -> list[int]:
            with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
                return [_produce(client, "big", batch) for _ in range(per_connection)]

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            with ThreadPoolExecutor(connections) as pool:
                codes = [c for cs in pool.map(produce, range(connections)) for c in cs]
        finally:
            done.set()
            sampler.join()
        assert codes == [ErrorCode.NONE] * connections * per_connection
        with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
            fetched = client.request(FETCH, 12, Fetch(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 30,
                isolation_level=0, topics=[Fetch.FetchTopic(topic="big", partitions=[
                    Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1)])]))
        hwm = fetched.responses[0].partitions[0].high_watermark
        assert hwm == 1 + 4 * connections * per_connection  # every batch stored once
        sent = connections * per_connection * len(batch)
        grown = peak[0] - before
        print(f"\npeak memory +{grown / MIB:.0f} MiB with {sent / MIB:.0f} MiB sent at once")
        # the budget and one frame beyond it are read at most, in buffers 4 MiB large
        assert grown < 32 * MIB, f"{grown / MIB:.0f} MiB for {sent / MIB:.0f} MiB sent"


# ---- connection limits --------------------------------------------------------------------------

def test_max_connections_holds_the_next_client_until_one_closes(tmp_path):
    with _broker(tmp_path, **{"max.connections": "3"}) as broker:
        held = [WireClient(broker.bootstrap, timeout_s=DEADLINE_S) for _ in range(3)]
        try:
            assert all(_versions(c) == ErrorCode.NONE for c in held)
            with WireClient(broker.bootstrap, timeout_s=1.0) as waiting:  # in the backlog
                request = Versions(client_software_name="t", client_software_version="1")
                waiting.send_raw(waiting.frame(API_VERSIONS, 3, request))
                with pytest.raises(TimeoutError):
                    waiting.sock.recv(1)  # not accepted, so not answered
                held.pop().close()
                waiting.sock.settimeout(DEADLINE_S)
                assert waiting.read_response(API_VERSIONS, 3).error_code == ErrorCode.NONE
        finally:
            for client in held:
                client.close()


@pytest.mark.parametrize("settings,allowed", [
    ({"max.connections.per.ip": "2"}, 2),
    ({"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:3"}, 3),
])
def test_a_connection_beyond_max_connections_per_ip_is_closed_at_once(tmp_path, settings,
                                                                      allowed):
    with _broker(tmp_path, **settings) as broker:
        kept = [WireClient(broker.bootstrap, timeout_s=DEADLINE_S) for _ in range(allowed)]
        try:
            assert all(_versions(c) == ErrorCode.NONE for c in kept)
            with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as extra:
                assert extra.is_closed_by_peer()
            assert all(_versions(c) == ErrorCode.NONE for c in kept)
            kept.pop().close()  # a place is free again
            _wait(lambda: _accepted_again(broker), "a connection to be allowed again")
        finally:
            for client in kept:
                client.close()


def _accepted_again(broker: BrokerProcess) -> bool:
    with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
        try:
            return _versions(client) == ErrorCode.NONE
        except ConnectionError:
            return False  # closed: the broker had not seen the other one go yet


def test_connections_max_idle_ms_closes_an_idle_connection_but_not_a_busy_one(tmp_path):
    with _broker(tmp_path, **{"connections.max.idle.ms": "300"}) as broker:
        with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as setup:
            _create(setup, "idle")
        with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as idle, \
                WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as busy:
            assert _versions(idle) == ErrorCode.NONE
            # a long poll in flight: busy however long it lasts
            busy.send_raw(busy.frame(FETCH, 12, Fetch(
                replica_id=-1, max_wait_ms=int(DEADLINE_S * 1000), min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, topics=[Fetch.FetchTopic(topic="idle", partitions=[
                    Fetch.FetchPartition(partition=0, fetch_offset=0,
                                         partition_max_bytes=1 << 20)])])))
            assert idle.is_closed_by_peer()
            with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as producer:
                batch = bytes(build_batch([(None, b"wake", [], 1_000)]))
                assert _produce(producer, "idle", batch) == ErrorCode.NONE
            fetched = busy.read_response(FETCH, 12)
            assert fetched.responses[0].partitions[0].high_watermark == 1


# ---- bad requests -------------------------------------------------------------------------------

def test_malformed_requests_are_warned_about_a_few_times_per_client_in_plain_words(tmp_path):
    # Metadata v1 whose topic array is cut short: the decoder's own error is a struct message
    body = struct.pack(">hhih", 3, 1, 7, -1) + b"\0\0"
    with _broker(tmp_path) as broker:
        for _ in range(30):
            with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
                client.send_raw(struct.pack(">i", len(body)) + body)
                assert client.is_closed_by_peer()  # logged before it was closed
        _normal_client_works(broker, "after-malformed")
        log = broker.log_path.read_text()
    warnings = [line for line in log.splitlines() if "sent a malformed Metadata" in line]
    assert len(warnings) == BURST, "\n".join(warnings)
    assert "(12 bytes)" in warnings[0]
    assert "unpack_from" not in log and "requires a buffer" not in log


def test_refused_produce_batches_are_logged_a_few_times_per_client(tmp_path):
    corrupt = bytearray(build_batch([(None, b"v", [], 1_000)]))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    with _broker(tmp_path) as broker:
        with WireClient(broker.bootstrap, timeout_s=DEADLINE_S) as client:
            _create(client, "refusals")
            codes = {_produce(client, "refusals", bytes(corrupt)) for _ in range(30)}
        assert codes == {ErrorCode.CORRUPT_MESSAGE}  # every one answered
        _normal_client_works(broker, "after-refusals")
        log = broker.log_path.read_text()
    refusals = [line for line in log.splitlines() if "produce to refusals-0" in line]
    assert len(refusals) == BURST, "\n".join(refusals)
    assert "CRC" in refusals[0]
