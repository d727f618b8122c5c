"""One client's side of a scenario: the driver's operations with bounded waits, topic names of
the run, and the harness's own kafka-python (topic set-up, records a client cannot make)."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from commitgate.compat_tests.clients import ClientSpec
from commitgate.compat_tests.contract import DriverError, DriverProcess, Record, records_json

CALL_MARGIN_S = 60.0  # beyond a poll's own wait: how long an answer may take
POLL_MS = 30_000
# Kafka answers CreateTopics, CreatePartitions and config changes once its controller recorded
# them; the broker's own view follows a moment later, so a read straight after may not see them
SETTLE_S = 30.0
SETTLE_POLL_S = 0.05

T = TypeVar("T")


def eventually(read: Callable[[], T], done: Callable[[T], bool],
               within_s: float = SETTLE_S) -> T:
    """``read()`` again until ``done`` holds of its answer or ``within_s`` passed; the last
    answer either way (the caller's expectation then says what it saw)."""
    deadline = time.monotonic() + within_s
    while True:
        answer = read()
        if done(answer) or time.monotonic() >= deadline:
            return answer
        time.sleep(SETTLE_POLL_S)


@dataclass
class Harness:
    """The matrix's own admin and producer, independent of the client under test."""
    bootstrap: str
    admin: KafkaAdminClient | None = None
    reader: KafkaConsumer | None = None

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        if self.admin is None:
            self.admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
            self.reader = KafkaConsumer(bootstrap_servers=self.bootstrap)
        # the records' timestamps are from 1970: time retention (Kafka's and CommitGate's
        # 5-minute check) would delete them during a long run
        configs = {"retention.ms": "-1", **configs}
        self.admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
        eventually(lambda: self.admin.describe_topics([topic])[0],
                   lambda t: _has_leaders(t, partitions))
        # metadata names a leader before Kafka's replica acts as one (it answers
        # NOT_LEADER_OR_FOLLOWER meanwhile, which a client that is not idempotent meets by
        # sending its records again): ListOffsets retries until every leader answers
        self.reader.end_offsets([TopicPartition(topic, p) for p in range(partitions)])

    def produce(self, topic: str, records: Sequence[Record]) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap)
        try:
            for r in records:
                producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                              partition=r.partition, timestamp_ms=r.timestamp).get(30)
        finally:
            producer.close()

    def close(self) -> None:
        if self.admin is not None:
            self.admin.close()
        if self.reader is not None:
            self.reader.close()


@dataclass
class Session:
    client: ClientSpec
    driver: DriverProcess
    harness: Harness
    prefix: str  # unique per run, so a broker can be reused
    open_consumers: set[str] = field(default_factory=set)

    @property
    def bootstrap(self) -> str:
        return self.harness.bootstrap

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{self.client.name}-{suffix}"

    def topic(self, suffix: str, partitions: int, configs: dict[str, str] | None = None) -> str:
        topic = self.name(suffix)
        self.harness.create_topic(topic, partitions, configs or {})
        return topic

    def call(self, op: str, wait_ms: int = 0, **arguments) -> dict:
        return self.driver.call(op, CALL_MARGIN_S + wait_ms / 1000, **arguments)

    def produce(self, topic: str, records: Sequence[Record], **config) -> list[dict]:
        return self.call("produce", topic=topic, records=records_json(records),
                         config=config)["sent"]

    def harness_produce(self, topic: str, records: Sequence[Record]) -> None:
        self.harness.produce(topic, records)

    def open(self, name: str, topic: str, partitions: list[int] | None, group: str | None = None,
             start: object = "earliest", read_committed: bool = False,
             protocol: str = "classic") -> dict:
        # only the consumer protocol's scenarios send group_protocol (to the clients that have it)
        chosen = {} if protocol == "classic" else {"group_protocol": protocol}
        positions = self.call("consumer_open", name=name, topic=topic, partitions=partitions,
                              group=group, start=start, read_committed=read_committed, **chosen)
        self.open_consumers.add(name)
        return positions["positions"]

    def poll_raw(self, name: str, count: int, max_ms: int) -> dict:
        return self.call("poll", max_ms, name=name, count=count, max_ms=max_ms)

    def poll(self, name: str, count: int, max_ms: int = POLL_MS) -> list[Record]:
        return [Record.from_json(r) for r in self.poll_raw(name, count, max_ms)["records"]]

    def read(self, topic: str, partition: int, start: object, count: int) -> list[Record]:
        """Open a consumer on one partition, read ``count`` records, close it."""
        self.open("reader", topic, [partition], start=start)
        try:
            return self.poll("reader", count)
        finally:
            self.close("reader")

    def close(self, name: str) -> None:
        self.open_consumers.discard(name)
        self.call("consumer_close", name=name)

    def close_all(self) -> None:
        """Close what a scenario left open (it failed half-way)."""
        for name in sorted(self.open_consumers):
            self.close(name)

    @staticmethod
    def fails(action: Callable[[], object]) -> str | None:
        """The client's error if ``action`` failed, else None."""
        try:
            action()
        except DriverError as exc:
            return str(exc).splitlines()[0]
        return None


def _has_leaders(described: dict, partitions: int) -> bool:
    """Whether kafka-python's description of a topic shows every partition with a leader."""
    found = described.get("partitions") or []
    return described["error_code"] == 0 and len(found) == partitions and \
        all(p["leader_id"] >= 0 for p in found)
