"""Idempotent producers' state survives cleaning: a producer writes to a compacted topic, the
compactor rewrites its batches (they lose records) and the CommitLog cleaner relocates them and
deletes every segment that held the originals, so that after a SIGKILL (no periodic snapshot:
producer.snapshot.interval.ms is an hour; only the one the cleaner writes before it deletes a
segment) the broker rebuilds the state from that and a CommitLog holding only copies, some of
them after newer batches. Retries of acknowledged batches must still be
answered with their original offsets, the next sequence accepted and a gap refused; a clean
restart (SIGTERM, from a snapshot) must behave the same; and a real idempotent client that keeps
producing across a SIGKILL must see every message stored exactly once."""
from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch, decode_records, iter_batch_headers
from tests.gateway.idempotent_wire import (
    CREATE_TOPICS,
    FETCH,
    Create,
    Fetch,
    init_producer_id,
    produce,
)

TOPIC = "idempotent-compacted"
SEGMENT_BYTES = 256 << 10
SETTINGS = {"commitlog.segment.bytes": str(SEGMENT_BYTES),
            "log.retention.check.interval.ms": "100",
            "producer.snapshot.interval.ms": "3600000",  # no snapshot before a SIGKILL
            "num.partitions": "1"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                 "max.compaction.lag.ms": "500"}
SHARED_KEYS = [b"shared-%02d" % i for i in range(16)]  # reused: their old records go
BIG = 300  # bytes of a shared key's value: most of what the compactor removes
CLEANING_DEADLINE_S = 150.0
FILLER_MAX_BYTES = 40 * SEGMENT_BYTES  # bound on the filler written to roll the CommitLog
CLEANING_LINES = re.compile(r"compaction: |cleaner: |producer state: ")


# ---- broker and wire helpers -----------------------------------------------------------------


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", dict(SETTINGS))
    process.start()
    try:
        yield process
    finally:
        process.kill()


def _create_compacted(client: WireClient) -> None:
    request = Create(topics=[Create.CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=1,
        configs=[Create.CreatableTopicConfig(name=k, value=v) for k, v in TOPIC_CONFIGS.items()])],
        timeout_ms=5000)
    assert client.request(CREATE_TOPICS, 7, request).topics[0].error_code == ErrorCode.NONE


def _fetch(client: WireClient, offset: int = 0):
    """The partition's answer to a fetch from ``offset`` (up to 8 MiB)."""
    request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, session_epoch=-1,
                    topics=[Fetch.FetchTopic(topic=TOPIC, partitions=[Fetch.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=8 << 20)])])
    partition = client.request(FETCH, 12, request).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE, partition.error_code
    return partition


def _stored_batches(client: WireClient) -> dict[int, object]:
    """Headers of the partition's stored batches by base offset (a fetch may meet a batch
    twice when compaction pointed a dropped batch's offsets at it)."""
    return {h.base_offset: h for h in iter_batch_headers(bytes(_fetch(client).records or b""))}


def _high_watermark(client: WireClient) -> int:
    return _fetch(client).high_watermark


def _segments(broker: BrokerProcess) -> set[str]:
    """The CommitLog segment files (a pre-allocation in progress left out)."""
    return {path.name for path in (broker.data_dir / "commitlog").iterdir()
            if path.name.isdigit()}


def _log(broker: BrokerProcess, since: int = 0) -> str:
    return broker.log_path.read_bytes()[since:].decode(errors="replace")


def _cleaning_log(broker: BrokerProcess) -> str:
    lines = [line for line in _log(broker).splitlines() if CLEANING_LINES.search(line)]
    return "\n".join(lines[-60:])


def _wait(what: str, broker: BrokerProcess, condition, deadline_s: float = CLEANING_DEADLINE_S):
    """Poll ``condition`` until it holds (returns its value) or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {deadline_s}s\n{_cleaning_log(broker)}")
        time.sleep(0.1)


def _filler_batch(n: int) -> bytearray:
    """A batch without producer id whose keys the next filler batch supersedes (so compaction
    drops it whole): it only rolls the CommitLog."""
    now = int(time.time() * 1000)
    return bytearray(build_batch([(b"filler-%02d" % i, b"f%d-%d-" % (n, i) + b"f" * 400, [], now)
                                  for i in range(16)]))


def _roll_past(broker: BrokerProcess, client: WireClient, held: set[str]) -> None:
    """Write filler until the CommitLog writes two segments past the segments ``held`` (those
    that existed when the batches to clean away were written), so that all of them can go."""
    highest = max(int(name) for name in held)
    written, n = 0, 0
    while max(int(name) for name in _segments(broker)) < highest + 2 * SEGMENT_BYTES:
        assert written < FILLER_MAX_BYTES, f"the CommitLog did not roll: {_segments(broker)}"
        batch = _filler_batch(n)
        assert produce(client, TOPIC, batch, acks=-1).error_code == ErrorCode.NONE
        written, n = written + len(batch), n + 1


def _wait_cleaned(broker: BrokerProcess, client: WireClient, held: set[str], producer_id: int,
                  last_offset: int, rewritten, relocated: str | None = None) -> None:
    """Wait until the compactor cleaned past ``last_offset``, the stored batches of the producer
    satisfy ``rewritten`` and every segment ``held`` was deleted (``relocated`` first)."""
    cleaned = re.compile(rf"compaction: cleaned {TOPIC}-0 up to offset (\d+)")
    _wait(f"the compactor cleaned past offset {last_offset}", broker, lambda: any(
        int(m) > last_offset for m in cleaned.findall(_log(broker))))
    _wait("the producer's batches were rewritten", broker, lambda: rewritten(
        [h for h in _stored_batches(client).values() if h.producer_id == producer_id]))
    _wait(f"the CommitLog segments {sorted(held)} were deleted", broker,
          lambda: not held & _segments(broker))
    log, directory = _log(broker), broker.data_dir / "commitlog"
    assert all(f"cleaner: deleting CommitLog segment {directory / name}" in log
               for name in held), _cleaning_log(broker)
    if relocated is not None:
        assert f"cleaner: relocating the live entries of {directory / relocated}" in log, \
            _cleaning_log(broker)


def _supersede_shared_keys(client: WireClient) -> None:
    """Another writer (no producer id) stores every shared key once more, then a batch of a
    key of its own (the partition's last batch is never cleaned, nor mapped)."""
    now = int(time.time() * 1000)
    for records in ([(key, b"other", [], now) for key in SHARED_KEYS], [(b"tail", b"", [], now)]):
        assert produce(client, TOPIC, bytearray(build_batch(records)),
                       acks=-1).error_code == ErrorCode.NONE


def _restart(broker: BrokerProcess, how: str) -> int:
    """SIGKILL or SIGTERM the broker and start it again on its data; returns where the new
    life's log begins."""
    if how == "sigkill":
        broker.kill()
    else:
        assert broker.stop() == 0, broker.log_tail()
    since = broker.log_path.stat().st_size
    broker.start()
    return since


def _restored_from(broker: BrokerProcess, since: int) -> str:
    """The start's producer state line (waits for it: it is logged before the broker serves)."""
    return _wait("the producer state restore line", broker, lambda: next(
        (line for line in _log(broker, since).splitlines() if "producer state: " in line), None),
        deadline_s=30)


# ---- an idempotent producer on the wire ----------------------------------------------------


@dataclass
class Sent:
    seq: int
    records: int
    offset: int
    batch: bytearray


class WireProducer:
    """Produces batches with an explicit producer id, epoch 0 and sequences, acks=-1."""

    def __init__(self, client: WireClient) -> None:
        self.pid = init_producer_id(client).producer_id
        self.next_seq = 0
        self.sent: list[Sent] = []

    @staticmethod
    def batch(pid: int, seq: int, records: list[tuple[bytes, bytes]]) -> bytearray:
        now = int(time.time() * 1000)
        return bytearray(build_batch([(k, v, [], now) for k, v in records], producer_id=pid,
                                     producer_epoch=0, base_sequence=seq))

    def send(self, client: WireClient, records: list[tuple[bytes, bytes]]) -> Sent:
        batch = self.batch(self.pid, self.next_seq, records)
        out = produce(client, TOPIC, batch, acks=-1)
        assert out.error_code == ErrorCode.NONE, out
        sent = Sent(self.next_seq, len(records), out.base_offset, batch)
        self.sent.append(sent)
        self.next_seq += len(records)
        return sent


def _retry_label(back: int, sent: Sent) -> str:
    which = "the last acknowledged batch" if back == 0 else f"the batch {back} before it"
    return f"a retry of {which} (seq {sent.seq}, offset {sent.offset})"


def _check_state(broker: BrokerProcess, producer: WireProducer, end: int) -> None:
    """After the restart: the last five acknowledged batches of ``producer`` are answered as
    duplicates with their original offsets (nothing appended), a gap is refused, the next
    sequence is accepted at the log end and its retry is a duplicate."""
    pid, last5 = producer.pid, producer.sent[-5:]
    with WireClient(broker.bootstrap) as client:
        observed: dict[str, object] = {}
        for back, sent in enumerate(reversed(last5)):  # the last first: a retry's usual case
            out = produce(client, TOPIC, sent.batch, acks=-1)
            observed[_retry_label(back, sent)] = (ErrorCode(out.error_code).name,
                                                  out.base_offset)
        observed["log end after the retries"] = _high_watermark(client)
        gap = WireProducer.batch(pid, producer.next_seq + 3, [(b"gap", b"gap")])
        observed["a sequence gap"] = ErrorCode(produce(client, TOPIC, gap,
                                                       acks=-1).error_code).name
        nxt = WireProducer.batch(pid, producer.next_seq, [(b"next", b"next")])
        out = produce(client, TOPIC, nxt, acks=-1)
        observed["the next sequence"] = (ErrorCode(out.error_code).name, out.base_offset)
        out = produce(client, TOPIC, nxt, acks=-1)
        observed["a retry of the next sequence"] = (ErrorCode(out.error_code).name,
                                                    out.base_offset)
        observed["log end at last"] = _high_watermark(client)
    expected = {_retry_label(back, sent): ("NONE", sent.offset)
                for back, sent in enumerate(reversed(last5))}
    expected |= {"log end after the retries": end,
                 "a sequence gap": "OUT_OF_ORDER_SEQUENCE_NUMBER",
                 "the next sequence": ("NONE", end),
                 "a retry of the next sequence": ("NONE", end),
                 "log end at last": end + 1}
    wrong = "\n".join(f"  {what}: got {observed[what]}, expected {want}"
                      for what, want in expected.items() if observed[what] != want)
    assert observed == expected, f"producer {pid} after the restart:\n{wrong}\n" \
        f"{_cleaning_log(broker)}"


# ---- the batches of a producer rewritten and relocated ---------------------------------------

PARTIAL_BATCHES = 300


def _partial_records(i: int) -> list[tuple[bytes, bytes]]:
    """Batch ``i``: seven records of shared keys (superseded later) and one of its own key
    (kept), so that the batch loses records but is not dropped."""
    shared = [(SHARED_KEYS[(7 * i + j) % len(SHARED_KEYS)], b"p%d-%d-" % (i, j) + b"v" * BIG)
              for j in range(7)]
    return [*shared, (b"own-%d" % i, b"p%d" % i)]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_state_survives_batches_rewritten_and_relocated(broker, how):
    """The producer's first batch (its one record stays current) must be relocated out of the
    first segment; the batches after it lose their shared records and are rewritten; the
    newest batch, written past a roll of the CommitLog and kept as it is, so lies before the
    copies of the batches acknowledged just before it, and every segment that held their
    originals is deleted."""
    with WireClient(broker.bootstrap) as client:
        _create_compacted(client)
        producer = WireProducer(client)
        producer.send(client, [(b"own-0", b"p0")])
        for i in range(1, PARTIAL_BATCHES):
            producer.send(client, _partial_records(i))
        held = _segments(broker)
        _roll_past(broker, client, held)
        newest = producer.send(client, [(b"own-%d" % PARTIAL_BATCHES, b"newest"),
                                        (b"own-%d" % (PARTIAL_BATCHES + 1), b"newest")])
        _supersede_shared_keys(client)  # only now do the batches before the newest lose records
        sent = {s.offset: s for s in producer.sent}

        def rewritten(batches) -> bool:
            # every batch kept with its own keys' records only, same offsets and sequences
            return sorted(h.base_offset for h in batches) == sorted(sent) and all(
                h.record_count == (sent[h.base_offset].records if h.base_offset == newest.offset
                                   else 1) and h.base_sequence == sent[h.base_offset].seq and
                h.last_offset_delta == sent[h.base_offset].records - 1 for h in batches)

        _wait_cleaned(broker, client, held, producer.pid, producer.sent[-2].offset, rewritten,
                      relocated=f"{0:020d}")
        end = _high_watermark(client)
        kept = [r.key for r in decode_records(bytes(_fetch(client).records))
                if r.key.startswith(b"own-")]
        assert kept == [b"own-%d" % i for i in range(PARTIAL_BATCHES + 2)]
    since = _restart(broker, how)
    restored = _restored_from(broker, since)
    assert "producer state:" in restored, restored
    _check_state(broker, producer, end)


# ---- a producer whose batches compaction emptied ---------------------------------------------

EMPTIED_BATCHES = 60


@pytest.mark.timeout(420)
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_state_survives_the_producers_batches_emptied(broker, how):
    """Another writer supersedes every record of the producer, so compaction leaves none of
    its batches (Kafka's cleaner keeps the last one, empty, for the producer's state; here the
    producer state snapshot is written before the cleaner deletes a segment)."""
    with WireClient(broker.bootstrap) as client:
        _create_compacted(client)
        producer = WireProducer(client)
        for i in range(EMPTIED_BATCHES):
            producer.send(client, [(SHARED_KEYS[(4 * i + j) % len(SHARED_KEYS)],
                                    b"e%d-%d-" % (i, j) + b"v" * BIG) for j in range(4)])
        held = _segments(broker)
        _supersede_shared_keys(client)
        _roll_past(broker, client, held)
        _wait_cleaned(broker, client, held, producer.pid, producer.sent[-1].offset,
                      lambda batches: not batches)
        end = _high_watermark(client)
    since = _restart(broker, how)
    restored = _restored_from(broker, since)
    assert "producer state:" in restored, restored
    _check_state(broker, producer, end)


# ---- a real idempotent client across a SIGKILL -----------------------------------------------

CLIENT_FIRST = 3000  # shared keys: compacted and relocated before the kill
CLIENT_SECOND = 20_000  # own keys: all of them must survive, once each


@pytest.mark.timeout(600)
def test_an_idempotent_client_producing_across_a_sigkill_stores_each_message_once(broker):
    with WireClient(broker.bootstrap) as client:
        _create_compacted(client)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 32768,  # well below a segment
                         "message.timeout.ms": 300_000,
                         "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500})
    acked: dict[bytes, int] = {}
    errors: list[object] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked[message.value()] = message.offset()

    first = [(SHARED_KEYS[i % len(SHARED_KEYS)], b"c%d-" % i + b"v" * BIG)
             for i in range(CLIENT_FIRST)]
    for key, value in first:
        producer.produce(TOPIC, value, key, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors
    held = _segments(broker)
    last_first = max(acked.values())
    survivors = {key: value for key, value in first}  # each shared key's last value

    def rewritten(batches) -> bool:
        with WireClient(broker.bootstrap) as reader:
            records = [r for r in decode_records(bytes(_fetch(reader).records))
                       if r.key in survivors]
        return len(batches) < CLIENT_FIRST and \
            {r.key: r.value for r in records} == survivors and len(records) == len(survivors)

    with WireClient(broker.bootstrap) as client:
        pid = next(h.producer_id for h in _stored_batches(client).values())
        _roll_past(broker, client, held)
        _wait_cleaned(broker, client, held, pid, last_first, rewritten)

    second = [(b"own-%d" % i, b"u%06d" % i) for i in range(CLIENT_SECOND)]
    before, burst = CLIENT_SECOND // 4, CLIENT_SECOND // 4  # then the kill, then the rest

    def send(messages) -> None:
        for key, value in messages:
            producer.produce(TOPIC, value, key, partition=0, on_delivery=on_delivery)
            producer.poll(0)

    try:
        send(second[:before])
        _wait("deliveries before the kill", broker,
              lambda: producer.poll(0.1) >= 0 and len(acked) >= CLIENT_FIRST + before // 2,
              deadline_s=60)
        send(second[before:before + burst])
        in_flight = len(producer)  # the kill catches these queued or in flight: retried after
        broker.kill()
        assert in_flight > 0
        since = broker.log_path.stat().st_size
        broker.start()
        restored = _restored_from(broker, since)
        assert "producer state:" in restored, restored
        send(second[before + burst:])
        assert producer.flush(240) == 0
    finally:
        producer.flush(0)
    assert not errors, f"{len(errors)} delivery errors, {in_flight} messages unacknowledged " \
        f"at the kill: {errors[:5]}"
    assert all(value in acked for _, value in second), "not every message was acknowledged"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    read: list[tuple[int, bytes, bytes]] = []
    try:
        consumer.assign([ConfluentPartition(TOPIC, 0, 0)])
        end = consumer.get_watermark_offsets(ConfluentPartition(TOPIC, 0), timeout=30)[1]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not read or read[-1][0] < end - 1):
            message = consumer.poll(1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            read.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert read and read[-1][0] == end - 1, f"read up to {read[-1:]} of {end}"
    assert [o for o, _, _ in read] == sorted({o for o, _, _ in read})
    values = Counter(value for _, _, value in read)
    assert [v for v, count in values.items() if count > 1] == []
    own = [(offset, value) for offset, key, value in read if key.startswith(b"own-")]
    assert [value for _, value in own] == [value for _, value in second], \
        f"{len(own)} of {len(second)} own-key messages read once, in order"
    assert all(acked[value] == offset for offset, value in own)
    last_shared = {key: value for _, key, value in read if key in survivors}
    assert last_shared == survivors
