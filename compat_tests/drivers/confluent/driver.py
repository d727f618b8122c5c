"""confluent-kafka (librdkafka) behind the JSON-lines contract (compat_tests/contract.py).
librdkafka's consumer wants a group.id even for assigned partitions; an assign-only consumer
gets one it never joins. Assigned consumers start at offsets resolved here (watermarks, offsets
for times, committed offsets), so the position is known before the first fetch.
usage: python -m commitgate.compat_tests.drivers.confluent.driver BOOTSTRAP"""
from __future__ import annotations

import functools
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from commitgate.compat_tests.contract import bytes_of, hex_of
from commitgate.compat_tests.drivers.serve import serve

TIMEOUT_S = 30.0
ASSIGN_ONLY_GROUP = "compat-assign-only"


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumers: dict[str, Consumer] = {}

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()

    def hello(self) -> dict:
        return {"client": "confluent-kafka", "version": f"{confluent_kafka.version()} "
                f"(librdkafka {confluent_kafka.libversion()[0]})"}

    # ---- admin ----------------------------------------------------------------------------------

    def metadata(self, topic: str) -> dict:
        found = self.admin.list_topics(topic=topic, timeout=TIMEOUT_S)
        described = found.topics[topic]
        if described.error is not None:
            raise KafkaException(described.error)
        return {"partitions": sorted(described.partitions), "brokers": len(found.brokers)}

    def create_topic(self, topic: str, partitions: int, configs: dict) -> None:
        _wait(self.admin.create_topics([NewTopic(topic, partitions, 1, config=configs)]))

    def delete_topic(self, topic: str) -> None:
        _wait(self.admin.delete_topics([topic]))

    def list_topics(self) -> dict:
        return {"topics": list(self.admin.list_topics(timeout=TIMEOUT_S).topics)}

    def describe_configs(self, topic: str) -> dict:
        [future] = self.admin.describe_configs([ConfigResource("topic", topic)]).values()
        return {"configs": {name: e.value for name, e in future.result(TIMEOUT_S).items()}}

    def alter_config(self, topic: str, name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        _wait(self.admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=[entry])]))

    def create_partitions(self, topic: str, total: int) -> None:
        _wait(self.admin.create_partitions([NewPartitions(topic, total)]))

    def delete_records(self, topic: str, partition: int, offset: int) -> None:
        _wait(self.admin.delete_records([TopicPartition(topic, partition, offset)]))

    # ---- produce --------------------------------------------------------------------------------

    def produce(self, topic: str, records: list[dict], config: dict) -> dict:
        settings = {"bootstrap.servers": self.bootstrap, "linger.ms": config.get("linger_ms") or 0}
        for key, name in (("compression", "compression.type"), ("acks", "acks"),
                          ("idempotent", "enable.idempotence"), ("batch_bytes", "batch.size"),
                          ("max_request_bytes", "message.max.bytes"),
                          ("transactional_id", "transactional.id")):
            if config.get(key) is not None:
                settings[name] = config[key]
        if config.get("partitioner") == "murmur2":
            settings["partitioner"] = "murmur2_random"  # Kafka's for keyed records
        producer = Producer(settings)
        if config.get("transactional_id"):
            producer.init_transactions(TIMEOUT_S)
            producer.begin_transaction()
        sent: list[dict | None] = [None] * len(records)
        errors: list = []

        def on_delivery(index: int, error, message) -> None:
            if error is not None:
                errors.append(error)
            offset = message.offset()
            sent[index] = {"partition": message.partition(),
                           "offset": -1 if offset is None or offset < 0 else offset}

        for index, r in enumerate(records):
            extra = {} if r.get("partition") is None else {"partition": r["partition"]}
            producer.produce(topic, key=bytes_of(r["key"]), value=bytes_of(r["value"]),
                             headers=[(k, bytes_of(v)) for k, v in r["headers"]] or None,
                             timestamp=r.get("timestamp") or 0,
                             on_delivery=functools.partial(on_delivery, index), **extra)
        # flushed before the transaction ends: abort_transaction purges what is still queued
        if producer.flush(TIMEOUT_S) != 0:
            raise RuntimeError("records left undelivered")
        if config.get("transactional_id"):
            if config.get("abort"):
                producer.abort_transaction(TIMEOUT_S)
            else:
                producer.commit_transaction(TIMEOUT_S)
        if errors:
            raise KafkaException(errors[0])
        return {"sent": sent}

    # ---- consume --------------------------------------------------------------------------------

    def consumer_open(self, name: str, topic: str, partitions: list[int] | None,
                      group: str | None, start, read_committed: bool = False,
                      group_protocol: str = "classic") -> dict:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": group or ASSIGN_ONLY_GROUP,
            "group.protocol": group_protocol,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
        self.consumers[name] = consumer
        if partitions is None:
            consumer.subscribe([topic])  # "^...": a regex (the broker's, with "consumer")
            return {"positions": {}}
        positions = {p: self._start(consumer, topic, p, start) for p in partitions}
        consumer.assign([TopicPartition(topic, p, o) for p, o in positions.items()])
        return {"positions": {str(p): o for p, o in positions.items()}}

    @staticmethod
    def _start(consumer: Consumer, topic: str, partition: int, start) -> int:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT_S)
        if start == "earliest":
            return low
        if start == "latest":
            return high
        if start == "committed":
            [found] = consumer.committed([TopicPartition(topic, partition)], TIMEOUT_S)
            return found.offset if found.offset >= 0 else low
        if isinstance(start, dict):
            [found] = consumer.offsets_for_times(
                [TopicPartition(topic, partition, start["timestamp"])], TIMEOUT_S)
            return found.offset if found.offset >= 0 else high
        return start

    def poll(self, name: str, count: int, max_ms: int) -> dict:
        consumer = self.consumers[name]
        out: list[dict] = []
        deadline = time.monotonic() + max_ms / 1000
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.consume(count - len(out), 0.1):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append({"partition": m.partition(), "offset": m.offset(),
                            "timestamp": m.timestamp()[1], "key": hex_of(m.key()),
                            "value": hex_of(m.value()),
                            "headers": [[k, hex_of(v)] for k, v in m.headers() or []]})
        return {"records": out,
                "assignment": sorted(tp.partition for tp in consumer.assignment())}

    def commit(self, name: str, offsets: dict[str, int] | None = None) -> dict:
        consumer = self.consumers[name]
        if offsets is None:
            chosen = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        else:
            chosen = [TopicPartition(tp.topic, tp.partition, offsets[str(tp.partition)])
                      for tp in consumer.assignment() if str(tp.partition) in offsets]
        if chosen:
            consumer.commit(offsets=chosen, asynchronous=False)
        return {"committed": {str(tp.partition): tp.offset for tp in chosen}}

    def consumer_close(self, name: str) -> None:
        self.consumers.pop(name).close()


def _wait(futures: dict) -> None:
    for future in futures.values():
        future.result(TIMEOUT_S)


if __name__ == "__main__":
    serve(Driver(sys.argv[1]))
