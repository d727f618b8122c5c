"""UDP ingest throughput: datagrams/s accepted with no loss from one local sender, and the
broker's CPU per datagram, while a Kafka client produces and consumes through the same broker.

    python -m commitgate.bench.udp [--sizes 100 1024] [--rates 20000 40000 50000 ...] [--seconds 3]

For each datagram size, each rate in turn is sent for ``--seconds`` from one paced sender (no
window: a real sender does not know what the broker read); the broker's /metrics then say how
many datagrams it read and appended. A rate is "accepted" when every datagram sent was
appended. Meanwhile a confluent-kafka producer sends one record every 10 ms with acks=all and
its delivery latencies are reported, showing the broker still serves Kafka clients.
"""
from __future__ import annotations

import argparse
import functools
import re
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from commitgate.launcher import BrokerProcess

TOPIC = "udp-bench"
SETTLE_S = 30.0  # how long the broker may take to append what it was sent
PACE_EVERY = 64  # datagrams sent between looks at the clock


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class UdpCounts:
    received: int
    appended: int
    dropped: dict[str, int]


_SAMPLE = re.compile(r'^commitgate_udp_(\w+?)_total(?:\{reason="(\w+)"\})? (\S+)$', re.MULTILINE)


def udp_counts(admin_url: str) -> UdpCounts:
    """The broker's UDP ingest counters, from its /metrics."""
    text = urllib.request.urlopen(admin_url + "/metrics", timeout=10).read().decode()
    counts = UdpCounts(0, 0, {})
    for name, reason, value in _SAMPLE.findall(text):
        if name == "datagrams_received":
            counts.received = int(float(value))
        elif name == "records_appended":
            counts.appended = int(float(value))
        elif name == "dropped":
            counts.dropped[reason] = int(float(value))
    return counts


def send_paced(address: tuple[str, int], payloads: Iterable[bytes], rate: float,
               ahead: Callable[[int], None] | None = None) -> float:
    """Send ``payloads`` at most ``rate`` a second; ``ahead(sent)`` is called every 1,000
    datagrams (a test uses it to stay within a window of what the broker read). Returns the
    seconds it took."""
    began = time.perf_counter()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        for sent, payload in enumerate(payloads, 1):
            sock.send(payload)
            if sent % PACE_EVERY == 0:
                early = began + sent / rate - time.perf_counter()
                if early > 0:
                    time.sleep(early)
            if ahead is not None and sent % 1_000 == 0:
                ahead(sent)
    return time.perf_counter() - began


def wait_appended(admin_url: str, total: int, deadline_s: float = SETTLE_S) -> UdpCounts:
    """Counts once ``total`` datagrams were dealt with (appended or dropped), or once nothing
    moved for a second (datagrams lost before the socket never arrive)."""
    deadline = time.monotonic() + deadline_s
    last, still_since = None, time.monotonic()
    while True:
        counts = udp_counts(admin_url)
        done = counts.appended + sum(counts.dropped.values())
        if done >= total or time.monotonic() > deadline:
            return counts
        if (counts.received, done) != last:
            last, still_since = (counts.received, done), time.monotonic()
        elif counts.received == done and time.monotonic() - still_since > 1.0:
            return counts
        time.sleep(0.05)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


class KafkaTraffic:
    """A producer sending one record every 10 ms (acks=all), timing each delivery."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "linger.ms": 0})
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-traffic", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(10)
        self.producer = None  # destroyed now, not after the broker stopped

    def take(self) -> tuple[list[float], int]:
        latencies, failures = self.latencies, self.failures
        self.latencies, self.failures = [], 0
        return latencies, failures

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            sent = time.perf_counter()
            self.producer.produce("kafka-side", b"x" * 100,
                                  on_delivery=functools.partial(self._delivered, sent))
            self.producer.poll(0)

    def _delivered(self, sent: float, error, _message) -> None:
        if error is not None:
            self.failures += 1
        else:
            self.latencies.append(time.perf_counter() - sent)


def run_rate(broker: BrokerProcess, address: tuple[str, int], size: int, rate: int,
             seconds: float, traffic: KafkaTraffic) -> dict[str, object]:
    before = udp_counts(broker.admin_url)
    count = int(rate * seconds)
    payload = b"x" * size
    traffic.take()
    cpu = _cpu_seconds(broker.process.pid)
    elapsed = send_paced(address, (payload for _ in range(count)), rate)
    after = wait_appended(broker.admin_url, before.appended + count)
    cpu = _cpu_seconds(broker.process.pid) - cpu
    latencies, failures = traffic.take()
    appended = after.appended - before.appended
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 2 else float("nan")
    return {"size": size, "rate": rate, "sent_rate": round(count / elapsed), "sent": count,
            "appended": appended, "lost": count - appended,
            "cpu_us_per_datagram": round(cpu / max(appended, 1) * 1e6, 2),
            "kafka_produces": len(latencies), "kafka_failures": failures,
            "kafka_p99_ms": round(p99 * 1000, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--rates", type=int, nargs="+",
                        default=[20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args(argv)
    port = free_udp_port()
    with tempfile.TemporaryDirectory() as root:
        broker = BrokerProcess(Path(root) / "data", {
            "udp.listeners": f"udp://127.0.0.1:{port}", "udp.topic": TOPIC,
            "num.partitions": str(args.partitions)})
        with broker, KafkaTraffic(broker.bootstrap) as traffic:
            send_paced(("127.0.0.1", port), [b"warm-up"], 1)  # creates the topic, unmeasured
            wait_appended(broker.admin_url, 1)
            for size in args.sizes:
                for rate in args.rates:
                    result = run_rate(broker, ("127.0.0.1", port), size, rate, args.seconds,
                                      traffic)
                    print(result, flush=True)
                    if result["lost"]:
                        break  # the no-loss limit for this size is below this rate


if __name__ == "__main__":
    main()
