"""Load generator processes for broker benchmarks: librdkafka (confluent-kafka) producers and
consumers, one per process, printing one JSON line of what they did. Running them outside the
harness keeps the harness's own Python off the measured path."""
from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

DEADLINE_S = 300.0


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict:
    delivered = failed = 0

    def on_delivery(err, _msg) -> None:
        nonlocal delivered, failed
        if err is None:
            delivered += 1
        else:
            failed += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1 << 20, "enable.idempotence": False,
                         "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none"})
    payload = b"x" * size
    start = time.perf_counter()
    deadline = start + DEADLINE_S
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
                if time.perf_counter() > deadline:
                    raise TimeoutError("producer queue stayed full") from None
        producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.perf_counter()))
    seconds = time.perf_counter() - start
    return {"records": delivered, "failed": failed + remaining, "bytes": delivered * size,
            "seconds": seconds}


def consume(bootstrap: str, topic: str, count: int) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commitgate-bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                         "max.partition.fetch.bytes": 10 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = size = 0
    begin = time.perf_counter()
    start = None  # the clock starts at the first record: connection set-up is not fetching
    while got < count and time.perf_counter() - begin < DEADLINE_S:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                start = start or time.perf_counter()
                got += 1
                size += len(message.value())
    seconds = time.perf_counter() - (start or begin)
    consumer.close()
    return {"records": got, "failed": 0, "bytes": size, "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--acks", default="1")
    args = parser.parse_args(argv)
    try:
        if args.mode == "produce":
            result = produce(args.bootstrap, args.topic, args.count, args.size, args.acks)
        else:
            result = consume(args.bootstrap, args.topic, args.count)
    except (KafkaException, TimeoutError) as exc:
        result = {"error": str(exc)}
    print(json.dumps(result), flush=True)
    sys.exit(0 if "error" not in result else 1)


if __name__ == "__main__":
    main()
