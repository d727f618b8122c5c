"""A group consumer for the group tests, run as its own process with one of three clients:
kafka-python, aiokafka or confluent-kafka. It prints JSON lines on stdout:

  {"event": "assigned", "partitions": [0, 3]}          after every rebalance
  {"event": "record", "partition": 0, "offset": 7}     each record, once processed
  {"event": "committed"}                               after the commit that follows a batch

It commits (synchronously) after processing each polled batch. A line "leave" on stdin makes it
close its consumer (leaving the group) and exit.

usage: group_consumer.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS [INSTANCE_ID]
"""
from __future__ import annotations

import asyncio
import json
import sys
import threading

POLL_MS = 200


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def watch_stdin() -> threading.Event:
    leave = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "leave":
                break
        leave.set()  # "leave", or the test runner went away
    threading.Thread(target=read, daemon=True).start()
    return leave


def reporting(base: type) -> type:
    """A rebalance listener (of kafka-python's or aiokafka's kind) that reports assignments."""
    class Listener(base):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))
    return Listener


def run_kafka_python(bootstrap, topic, group, session_ms, instance, leave) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=session_ms,
                             heartbeat_interval_ms=session_ms // 5,
                             group_instance_id=instance)
    consumer.subscribe([topic], listener=reporting(ConsumerRebalanceListener)())
    while not leave.is_set():
        batches = consumer.poll(timeout_ms=POLL_MS)
        for tp, records in batches.items():
            for r in records:
                emit("record", partition=tp.partition, offset=r.offset)
        if batches:
            consumer.commit()
            emit("committed")
    consumer.close()


async def run_aiokafka(bootstrap, topic, group, session_ms, instance, leave) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=session_ms,
                                heartbeat_interval_ms=session_ms // 5,
                                group_instance_id=instance)
    consumer.subscribe([topic], listener=reporting(ConsumerRebalanceListener)())
    await consumer.start()
    try:
        while not leave.is_set():
            batches = await consumer.getmany(timeout_ms=POLL_MS)
            for tp, records in batches.items():
                for r in records:
                    emit("record", partition=tp.partition, offset=r.offset)
            if batches:
                await consumer.commit()
                emit("committed")
    finally:
        await consumer.stop()


def run_confluent(bootstrap, topic, group, session_ms, instance, leave) -> None:
    from confluent_kafka import Consumer

    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": session_ms,
              "heartbeat.interval.ms": session_ms // 5}
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    consumer.subscribe([topic], on_assign=lambda c, parts: emit(
        "assigned", partitions=sorted(p.partition for p in parts)))
    while not leave.is_set():
        messages = consumer.consume(num_messages=100, timeout=POLL_MS / 1000)
        processed = [m for m in messages if m.error() is None]
        for m in processed:
            emit("record", partition=m.partition(), offset=m.offset())
        if processed:
            consumer.commit(asynchronous=False)
            emit("committed")
    consumer.close()


def main() -> None:
    client, bootstrap, topic, group, session = sys.argv[1:6]
    instance = sys.argv[6] if len(sys.argv) > 6 else None
    args = (bootstrap, topic, group, int(session), instance, watch_stdin())
    if client == "aiokafka":
        asyncio.run(run_aiokafka(*args))
    elif client == "confluent":
        run_confluent(*args)
    else:
        run_kafka_python(*args)


if __name__ == "__main__":
    main()
