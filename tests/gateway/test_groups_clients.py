"""Consumer groups with real clients in separate processes (tests/clients/group_consumer.py):
kafka-python, aiokafka and confluent-kafka share a 6-partition topic, one leaves, one is
SIGKILLed, and every produced record is processed at least once with nothing skipped; a
broker SIGKILL mid-consumption resumes from the committed offsets; a static member restarted
gets its partitions back without a rebalance."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from commitgate.launcher import BrokerProcess

DRIVER = Path(__file__).parents[1] / "clients" / "group_consumer.py"
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}
SESSION_MS = 2000
STATIC_SESSION_MS = 30_000  # longer than a consumer process takes to start again
PARTITIONS = 6
WAIT_S = 90.0  # a bound on each wait, never a measurement


class Group:
    """The consumer processes of one group and what they reported."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.events: queue.Queue = queue.Queue()
        self.procs: dict[str, subprocess.Popen] = {}
        self.assigned: dict[str, list[int]] = {}
        self.seen: set[tuple[int, int]] = set()
        self.assignments: dict[str, int] = {}  # "assigned" events per consumer so far

    def start(self, name: str, client: str, instance: str | None = None,
              session_ms: int = SESSION_MS) -> None:
        args = [sys.executable, str(DRIVER), client, self.bootstrap, self.topic, self.group,
                str(session_ms)] + ([instance] if instance else [])
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs[name] = proc
        threading.Thread(target=self._read, args=(name, proc), daemon=True).start()

    def _read(self, name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                self.events.put((name, json.loads(line)))

    def wait(self, condition, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            left = deadline - time.monotonic()
            assert left > 0, f"gave up waiting for {what}: assigned {self.assigned}"
            try:
                name, event = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if event["event"] == "assigned":
                self.assigned[name] = event["partitions"]
                self.assignments[name] = self.assignments.get(name, 0) + 1
            elif event["event"] == "record":
                self.seen.add((event["partition"], event["offset"]))

    def covers_all(self, names) -> bool:
        owned = [p for n in names for p in self.assigned.get(n, [])]
        return sorted(owned) == list(range(PARTITIONS)) and all(self.assigned.get(n)
                                                                 for n in names)

    def leave(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.stdin.write("leave\n")
        proc.stdin.flush()
        assert proc.wait(60) == 0
        self.assigned.pop(name, None)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait(60)
        self.assigned.pop(name, None)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(60)


def produce(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = [producer.send(topic, b"x", partition=p) for p in range(PARTITIONS)
               for _ in range(per_partition)]
    producer.flush()
    producer.close()
    return {(f.get().partition, f.get().offset) for f in futures}


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


@pytest.fixture
def group_broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", SETTINGS).start()
    admin = KafkaAdminClient(bootstrap_servers=process.bootstrap)
    admin.create_topics([NewTopic("events", PARTITIONS, 1)])
    admin.close()
    yield process
    process.kill()


@pytest.fixture
def group(group_broker):
    consumers = Group(group_broker.bootstrap, "events", "workers")
    yield consumers
    consumers.close()


def test_three_clients_split_leave_and_crash_without_losing_records(group_broker, group):
    bootstrap = group_broker.bootstrap
    produced = produce(bootstrap, "events", 20)
    for name in ("kafka-python", "aiokafka", "confluent"):
        group.start(name, name)
    group.wait(lambda: group.covers_all(["kafka-python", "aiokafka", "confluent"]),
               "the 6 partitions split among three consumers")
    group.wait(lambda: produced <= group.seen, "the first records")

    group.leave("kafka-python")  # LeaveGroup: the others take its partitions at once
    produced |= produce(bootstrap, "events", 20)
    group.wait(lambda: group.covers_all(["aiokafka", "confluent"]) and produced <= group.seen,
               "records after a member left")

    group.kill("aiokafka")  # no LeaveGroup: its partitions move after the session timeout
    produced |= produce(bootstrap, "events", 20)
    group.wait(lambda: group.covers_all(["confluent"]) and produced <= group.seen,
               "records after a member was killed")
    ends = {p: 60 for p in range(PARTITIONS)}
    group.wait(lambda: committed(bootstrap, "workers", "events") == ends,
               "every partition committed to its end")


def test_group_resumes_from_committed_offsets_after_broker_sigkill(group_broker, group):
    bootstrap = group_broker.bootstrap
    first = produce(bootstrap, "events", 10)
    group.start("c", "confluent")
    group.wait(lambda: first <= group.seen, "the first records")
    ends = {p: 10 for p in range(PARTITIONS)}
    group.wait(lambda: committed(bootstrap, "workers", "events") == ends, "the commits")
    group.kill("c")
    group_broker.kill()
    group_broker.start()  # same port and data directory
    second = produce(bootstrap, "events", 10)
    group.seen.clear()
    group.start("k", "kafka-python")
    group.wait(lambda: second <= group.seen, "the records produced after the restart")
    assert group.seen == second  # resumed at the committed offsets: nothing read again


def test_restarted_static_member_gets_its_partitions_without_rebalance(group):
    group.start("a", "confluent", instance="static-a", session_ms=STATIC_SESSION_MS)
    group.start("b", "confluent", instance="static-b", session_ms=STATIC_SESSION_MS)
    group.wait(lambda: group.covers_all(["a", "b"]), "both static members assigned")
    before, b_rebalances = dict(group.assigned), group.assignments["b"]
    group.kill("a")  # a crashed static member keeps its place until its session ends
    group.start("a", "confluent", instance="static-a", session_ms=STATIC_SESSION_MS)
    group.wait(lambda: group.assigned.get("a") == before["a"], "member a back")
    assert group.assigned["b"] == before["b"]
    assert group.assignments["b"] == b_rebalances  # b never went through a rebalance
