"""kafka-python behind the JSON-lines contract (compat_tests/contract.py).
usage: python -m commitgate.compat_tests.drivers.kafka_python.driver BOOTSTRAP"""
from __future__ import annotations

import sys
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

from commitgate.compat_tests.contract import bytes_of, hex_of
from commitgate.compat_tests.drivers.serve import serve

SEND_TIMEOUT_S = 30
POLL_STEP_MS = 1000  # the longest single poll (see poll)


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self.consumers: dict[str, KafkaConsumer] = {}

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()
        self.admin.close()

    def hello(self) -> dict:
        return {"client": "kafka-python", "version": kafka.__version__}

    # ---- admin ----------------------------------------------------------------------------------

    def metadata(self, topic: str) -> dict:
        [described] = self.admin.describe_topics([topic])
        assert described["error_code"] == 0, described
        return {"partitions": sorted(p["partition_index"] for p in described["partitions"]),
                "brokers": len(self.admin.describe_cluster()["brokers"])}

    def create_topic(self, topic: str, partitions: int, configs: dict) -> None:
        self.admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic])

    def list_topics(self) -> dict:
        return {"topics": self.admin.list_topics()}

    def describe_configs(self, topic: str) -> dict:
        # {resource type: {resource name: {config name: {"value": ..., ...}}}}
        found = self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [by_name] = found.values()
        return {"configs": {name: entry["value"] for name, entry in by_name[topic].items()}}

    def alter_config(self, topic: str, name: str, value: str) -> None:
        self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                 configs={name: value})])

    def create_partitions(self, topic: str, total: int) -> None:
        self.admin.create_partitions({topic: NewPartitions(total)})

    def delete_records(self, topic: str, partition: int, offset: int) -> None:
        self.admin.delete_records({TopicPartition(topic, partition): offset})

    # ---- produce --------------------------------------------------------------------------------

    def produce(self, topic: str, records: list[dict], config: dict) -> dict:
        settings = {"compression_type": config.get("compression") or None,
                    "linger_ms": config.get("linger_ms") or 0}
        if config.get("compression") == "none":
            settings["compression_type"] = None
        for key, name in (("idempotent", "enable_idempotence"), ("batch_bytes", "batch_size"),
                          ("max_request_bytes", "max_request_size"),
                          ("transactional_id", "transactional_id")):
            if config.get(key) is not None:
                settings[name] = config[key]
        if config.get("acks") is not None:
            settings["acks"] = config["acks"] if config["acks"] == "all" else int(config["acks"])
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, **settings)
        try:
            if config.get("transactional_id"):
                producer.init_transactions()
                producer.begin_transaction()
            futures = [producer.send(topic, key=bytes_of(r["key"]), value=bytes_of(r["value"]),
                                     headers=[(k, bytes_of(v)) for k, v in r["headers"]],
                                     partition=r.get("partition"), timestamp_ms=r.get("timestamp"))
                       for r in records]
            producer.flush(SEND_TIMEOUT_S)
            if config.get("transactional_id"):
                if config.get("abort"):
                    producer.abort_transaction()
                else:
                    producer.commit_transaction()
            metas = [f.get(SEND_TIMEOUT_S) for f in futures]
        finally:
            producer.close(SEND_TIMEOUT_S)
        return {"sent": [{"partition": m.partition, "offset": m.offset if m.offset is not None
                          and m.offset >= 0 else -1} for m in metas]}

    # ---- consume --------------------------------------------------------------------------------

    def consumer_open(self, name: str, topic: str, partitions: list[int] | None,
                      group: str | None, start, read_committed: bool = False) -> dict:
        reset = start if start in ("earliest", "latest") else "earliest"
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset=reset,
                                 isolation_level="read_committed" if read_committed
                                 else "read_uncommitted")
        self.consumers[name] = consumer
        if partitions is None:
            consumer.subscribe([topic])
            return {"positions": {}}
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        if isinstance(start, int):
            for tp in tps:
                consumer.seek(tp, start)
        elif isinstance(start, dict):
            found = consumer.offsets_for_times({tp: start["timestamp"] for tp in tps})
            for tp in tps:
                if found[tp] is None:
                    consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, found[tp].offset)
        return {"positions": {str(tp.partition): consumer.position(tp) for tp in tps}}

    def poll(self, name: str, count: int, max_ms: int) -> dict:
        consumer = self.consumers[name]
        out: list[dict] = []
        deadline = time.monotonic() + max_ms / 1000
        while len(out) < count and time.monotonic() < deadline:
            # polls of up to a second: kafka-python 3.0 drops a JoinGroup/SyncGroup round that
            # completes after the poll that started it timed out and starts another, so on a
            # loaded machine 100 ms polls could rejoin for ever (seen in CI: gen 1, 2, then
            # no assignment for 30 s)
            wait_ms = max(1, min(POLL_STEP_MS, int((deadline - time.monotonic()) * 1000)))
            for batch in consumer.poll(timeout_ms=wait_ms,
                                       max_records=count - len(out)).values():
                out += [_record(r) for r in batch]
        return {"records": out, "assignment": sorted(tp.partition for tp in consumer.assignment())}

    def commit(self, name: str, offsets: dict[str, int] | None = None) -> dict:
        consumer = self.consumers[name]
        chosen = {tp: consumer.position(tp) if offsets is None else offsets[str(tp.partition)]
                  for tp in consumer.assignment()
                  if offsets is None or str(tp.partition) in offsets}
        consumer.commit({tp: kafka.OffsetAndMetadata(o, "", -1) for tp, o in chosen.items()})
        return {"committed": {str(tp.partition): o for tp, o in chosen.items()}}

    def consumer_close(self, name: str) -> None:
        self.consumers.pop(name).close()


def _record(r) -> dict:
    return {"partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "key": hex_of(r.key), "value": hex_of(r.value),
            "headers": [[k, hex_of(v)] for k, v in r.headers]}


if __name__ == "__main__":
    serve(Driver(sys.argv[1]))
