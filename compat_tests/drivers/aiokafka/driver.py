"""aiokafka behind the JSON-lines contract (compat_tests/contract.py). Each request runs on one
event loop, so consumers' background tasks (heartbeats, rebalances) go on between polls.
usage: python -m commitgate.compat_tests.drivers.aiokafka.driver BOOTSTRAP"""
from __future__ import annotations

import asyncio
import sys
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import OffsetAndMetadata

from commitgate.compat_tests.contract import bytes_of, hex_of
from commitgate.compat_tests.drivers.serve import serve


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.loop = asyncio.new_event_loop()
        self.admin = self.loop.run_until_complete(self._start_admin())
        self.consumers: dict[str, AIOKafkaConsumer] = {}

    async def _start_admin(self) -> AIOKafkaAdminClient:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)  # made on the loop
        await admin.start()
        return admin

    def __getattr__(self, op: str):
        """Each operation is a coroutine ``_<op>``, run to completion on the driver's loop."""
        coroutine = getattr(type(self), f"_{op}", None)
        if coroutine is None:
            raise AttributeError(op)
        return lambda **arguments: self.loop.run_until_complete(coroutine(self, **arguments))

    def close(self) -> None:
        for consumer in self.consumers.values():
            self.loop.run_until_complete(consumer.stop())
        self.loop.run_until_complete(self.admin.close())

    async def _hello(self) -> dict:
        return {"client": "aiokafka", "version": aiokafka.__version__}

    # ---- admin ----------------------------------------------------------------------------------

    async def _metadata(self, topic: str) -> dict:
        [described] = (await self.admin.describe_topics([topic]))
        assert described["error_code"] == 0, described
        cluster = await self.admin.describe_cluster()
        return {"partitions": sorted(p["partition"] for p in described["partitions"]),
                "brokers": len(cluster["brokers"])}

    async def _create_topic(self, topic: str, partitions: int, configs: dict) -> None:
        response = await self.admin.create_topics([NewTopic(topic, partitions, 1,
                                                            topic_configs=configs)])
        assert all(error == 0 for _, error, *_ in response.topic_errors), response

    async def _delete_topic(self, topic: str) -> None:
        await self.admin.delete_topics([topic])

    async def _list_topics(self) -> dict:
        return {"topics": list(await self.admin.list_topics())}

    async def _describe_configs(self, topic: str) -> dict:
        [response] = await self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)])
        [resource] = response.resources
        return {"configs": {entry[0]: entry[1] for entry in resource[4]}}

    async def _alter_config(self, topic: str, name: str, value: str) -> None:
        await self.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                       configs={name: value})])

    async def _create_partitions(self, topic: str, total: int) -> None:
        await self.admin.create_partitions({topic: NewPartitions(total)})

    async def _delete_records(self, topic: str, partition: int, offset: int) -> None:
        await self.admin.delete_records({TopicPartition(topic, partition):
                                         RecordsToDelete(before_offset=offset)})

    # ---- produce --------------------------------------------------------------------------------

    async def _produce(self, topic: str, records: list[dict], config: dict) -> dict:
        settings: dict = {"linger_ms": config.get("linger_ms") or 0}
        if config.get("compression") not in (None, "none"):
            settings["compression_type"] = config["compression"]
        for key, name in (("idempotent", "enable_idempotence"), ("batch_bytes", "max_batch_size"),
                          ("max_request_bytes", "max_request_size"),
                          ("transactional_id", "transactional_id")):
            if config.get(key) is not None:
                settings[name] = config[key]
        if config.get("acks") is not None:
            settings["acks"] = config["acks"] if config["acks"] == "all" else int(config["acks"])
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **settings)
        await producer.start()
        try:
            if config.get("transactional_id"):
                await producer.begin_transaction()
            futures = [await producer.send(topic, key=bytes_of(r["key"]),
                                           value=bytes_of(r["value"]),
                                           headers=[(k, bytes_of(v)) for k, v in r["headers"]],
                                           partition=r.get("partition"),
                                           timestamp_ms=r.get("timestamp")) for r in records]
            if config.get("transactional_id"):
                if config.get("abort"):
                    await producer.abort_transaction()
                else:
                    await producer.commit_transaction()
            metas = [await f for f in futures]
        finally:
            await producer.stop()
        # acks=0: no metadata at all
        return {"sent": [{"partition": m.partition if m else r.get("partition") or 0,
                          "offset": m.offset if m and m.offset >= 0 else -1}
                         for m, r in zip(metas, records, strict=True)]}

    # ---- consume --------------------------------------------------------------------------------

    async def _consumer_open(self, name: str, topic: str, partitions: list[int] | None,
                             group: str | None, start, read_committed: bool = False) -> dict:
        reset = start if start in ("earliest", "latest") else "earliest"
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset=reset,
                                    isolation_level="read_committed" if read_committed
                                    else "read_uncommitted")
        await consumer.start()
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
            found = await consumer.offsets_for_times({tp: start["timestamp"] for tp in tps})
            for tp in tps:
                if found[tp] is None:
                    await consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, found[tp].offset)
        return {"positions": {str(tp.partition): await consumer.position(tp) for tp in tps}}

    async def _poll(self, name: str, count: int, max_ms: int) -> dict:
        consumer = self.consumers[name]
        out: list[dict] = []
        deadline = time.monotonic() + max_ms / 1000
        while len(out) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=100, max_records=count - len(out))
            for batch in batches.values():
                out += [_record(r) for r in batch]
        return {"records": out, "assignment": sorted(tp.partition for tp in consumer.assignment())}

    async def _commit(self, name: str, offsets: dict[str, int] | None = None) -> dict:
        consumer = self.consumers[name]
        chosen = {tp: await consumer.position(tp) if offsets is None
                  else offsets[str(tp.partition)] for tp in consumer.assignment()
                  if offsets is None or str(tp.partition) in offsets}
        await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in chosen.items()})
        return {"committed": {str(tp.partition): o for tp, o in chosen.items()}}

    async def _consumer_close(self, name: str) -> None:
        await self.consumers.pop(name).stop()


def _record(r) -> dict:
    return {"partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "key": hex_of(r.key), "value": hex_of(r.value),
            "headers": [[k, hex_of(v)] for k, v in r.headers]}


if __name__ == "__main__":
    serve(Driver(sys.argv[1]))
