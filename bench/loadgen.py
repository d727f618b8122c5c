"""Load generator processes for broker benchmarks: librdkafka (confluent-kafka) producers and
consumers, printing one JSON line of what they did. Running them outside the harness keeps the
harness's own Python off the measured path; several can run at once.

Producers may be idempotent or transactional: a transaction ends every ``--commit-ms``
milliseconds (committed), or every ``--txn-records`` records with every ``--abort-every``-th
aborted (a backlog with aborted transactions for read_committed readers).

CPU time is the whole process's (librdkafka's threads included) over the timed window. Times
are CLOCK_MONOTONIC, which every process on the machine shares, so the harness can merge
the windows of several processes and a consumer can compute a record's delay from the send
time its producer stamped into the first 8 bytes of the value.
"""
from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

DEADLINE_S = 120.0
IDLE_S = 10.0  # a consumer that gets nothing this long gives up (and reports what it got)
STAMP = struct.Struct("<q")
POLL_EVERY = 256  # records between polls: a poll after every record cost ~10% of the CPU
RUN_BYTES = 16 * 1024  # records in a row to one partition: 16 KiB batches, as bench.store
READY = "ready"  # the line a consumer prints once it is assigned and fetching
TXN_TIMEOUT_S = 60.0  # init_transactions, commit and abort: the broker's answer, not our pace
STATS_MS = 100  # how often an idempotent producer reports its state (its producer id's)


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Producers:
    """``count`` records spread round-robin over ``producers`` clients and, in runs of
    ``RUN_BYTES`` worth of records, over ``partitions`` (one record per partition in turn would
    make every batch one record long and measure the client's per-batch cost, not the broker's;
    real producers batch per partition the same way with sticky partitioning)."""

    def __init__(self, args: argparse.Namespace) -> None:
        config = {"bootstrap.servers": args.bootstrap, "acks": args.acks, "linger.ms": 5,
                  "batch.size": 1 << 20, "enable.idempotence": args.idempotent,
                  "queue.buffering.max.kbytes": max(1 << 16, (1 << 20) // args.producers),
                  "compression.type": "none", **client_settings(args)}
        self.args = args
        self.id_states = [""] * args.producers  # each client's idempotence state
        self.clients = [Producer(self._idempotent(_transactional(config, args, index), index))
                        for index in range(args.producers)]
        self.transactions = Transactions(self.clients, args)
        self.run_length = args.run or max(1, RUN_BYTES // args.size)
        self.delivered = self.failed = 0
        self.latencies_us: list[int] = []

    def _idempotent(self, config: dict, index: int) -> dict:
        if not self.args.idempotent:
            return config
        return {**config, "statistics.interval.ms": STATS_MS,
                "stats_cb": lambda report: self._on_stats(index, report)}

    def _on_stats(self, index: int, report: str) -> None:
        self.id_states[index] = json.loads(report).get("eos", {}).get("idemp_state", "")

    def ready(self) -> None:
        """Untimed: every client has its producer id before the clock starts. A transactional
        one gets it in init_transactions; an idempotent one asks by itself, and records sent
        before it has the id waited about 0.5 s (librdkafka 2.16), which would be timed."""
        if self.transactions.clients:
            self.transactions.init()
            return
        deadline = time.monotonic() + TXN_TIMEOUT_S
        while self.args.idempotent and any(state != "Assigned" for state in self.id_states):
            if time.monotonic() > deadline:
                raise TimeoutError("the idempotent producer got no producer id")
            for client in self.clients:
                client.poll(0.01)

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed += 1
            return
        self.delivered += 1
        if self.args.latency and msg.latency() is not None:
            self.latencies_us.append(int(msg.latency() * 1e6))

    def send(self, index: int, payload: bytes, deadline: float) -> None:
        client = self.clients[index % len(self.clients)]
        while True:
            try:
                partition = index // self.run_length % self.args.partitions
                client.produce(self.args.topic, payload, partition=partition,
                               on_delivery=self.on_delivery)
                return
            except BufferError:  # the client's queue is full: let it drain
                client.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full") from None

    def run(self) -> dict:
        args = self.args
        fixed = b"x" * args.size
        padding = b"x" * (args.size - STAMP.size)
        per_second = args.rate * len(self.clients)  # 0: as fast as the clients take them
        self.ready()
        start, cpu = time.monotonic(), time.process_time()
        deadline = start + DEADLINE_S
        self.transactions.begin()
        for index in range(args.count):
            if per_second:
                self._pace(start + index / per_second)
            payload = STAMP.pack(now_ns()) + padding if args.stamp else fixed
            self.send(index, payload, deadline)
            if index % POLL_EVERY == POLL_EVERY - 1:  # serve delivery reports in bulk
                for client in self.clients:
                    client.poll(0)
            self.transactions.after(index + 1)
        self.transactions.end(args.count)
        remaining = sum(client.flush(max(1.0, deadline - time.monotonic()))
                        for client in self.clients)
        end = time.monotonic()
        return {"records": self.delivered, "failed": self.failed + remaining,
                "bytes": self.delivered * args.size, "start": start, "end": end,
                "cpu_s": time.process_time() - cpu, "latencies_us": self.latencies_us,
                "aborted": self.transactions.aborted, "transactions": self.transactions.ended}

    def _pace(self, due: float) -> None:
        """Wait until ``due``, serving delivery reports meanwhile."""
        while (wait := due - time.monotonic()) > 0:
            for client in self.clients:
                client.poll(0)
            time.sleep(min(wait, 0.001))


def _transactional(config: dict, args: argparse.Namespace, index: int) -> dict:
    """A client's settings, with a transactional id of its own if it runs transactions."""
    if not (args.commit_ms or args.txn_records):
        return config
    return {**config, "transactional.id": f"commitgate-bench-{args.topic}-{index}",
            "transaction.timeout.ms": int(TXN_TIMEOUT_S * 1000)}


class Transactions:
    """Where the producers' transactions end: every ``commit_ms`` ms (the time checked every
    ``POLL_EVERY`` records, about a millisecond at full speed), or every ``txn_records``
    records, every ``abort_every``-th one aborted. All clients begin and end together; without
    either option every call is a no-op."""

    def __init__(self, clients: list[Producer], args: argparse.Namespace) -> None:
        self.clients = clients if args.commit_ms or args.txn_records else []
        self.interval_s = args.commit_ms / 1000
        self.records = args.txn_records
        self.abort_every = args.abort_every
        self.total = args.count
        self.due = 0.0
        self.ended = self.aborted = 0
        self.opened_at = 0  # records sent before the open transaction began

    def init(self) -> None:
        for client in self.clients:
            client.init_transactions(TXN_TIMEOUT_S)

    def begin(self) -> None:
        for client in self.clients:
            client.begin_transaction()
        self.due = time.monotonic() + self.interval_s

    def after(self, sent: int) -> None:
        """Ends the open transaction, and begins the next, if it is due after ``sent``."""
        if not self.clients:
            return
        if self.records:
            due = sent % self.records == 0
        else:
            due = sent % POLL_EVERY == 0 and time.monotonic() >= self.due
        if due:
            self.end(sent)
            if sent < self.total:
                self.begin()

    def end(self, sent: int) -> None:
        """Commits the open transaction, or aborts it if it is an ``abort_every``-th; an
        aborted one's records are flushed first, so that they reach the log (an abort
        purges what the client still holds)."""
        if not self.clients or sent == self.opened_at:
            return
        abort = self.abort_every and self.ended % self.abort_every == self.abort_every - 1
        for client in self.clients:
            if abort:
                if client.flush(TXN_TIMEOUT_S):
                    raise TimeoutError("records of a transaction to abort stayed unsent")
                client.abort_transaction(TXN_TIMEOUT_S)
            else:
                client.commit_transaction(TXN_TIMEOUT_S)
        if abort:
            self.aborted += sent - self.opened_at
        self.ended += 1
        self.opened_at = sent


def run_process(*args: str, timeout_s: float = 600.0) -> dict:
    """Run this module as a process of its own (its arguments ``args``); its last line is its
    JSON result. RuntimeError names the mode when it failed."""
    done = subprocess.run([sys.executable, "-m", "commitgate.bench.loadgen", *args],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": done.stderr.strip()[-500:]}
    if done.returncode != 0 or "error" in result:
        raise RuntimeError(f"bench.loadgen {args[0]} failed: {result.get('error')}")
    return result


def mb_per_s(result: dict) -> float:
    """A run's MB/s over its own timed window."""
    return result["bytes"] / 1e6 / max(result["end"] - result["start"], 1e-9)


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka settings given as --set KEY=VALUE (a listener's security, for one)."""
    return dict(item.split("=", 1) for item in args.set)


def consume(args: argparse.Namespace) -> dict:
    """Read ``count`` records from the start of the given partitions (with ``until_eof``, or
    until every partition's end: a backlog's reader need not know its exact split)."""
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "commitgate-bench",
                         "enable.auto.commit": False, "enable.partition.eof": args.until_eof,
                         "isolation.level": args.isolation, **client_settings(args)})
    partitions = [int(p) for p in args.partition_list.split(",")]
    # connected to the leader before the measurement: assigned before that connection is up,
    # librdkafka retries its first offset query on a 500 ms timer, which fell at random into
    # one workload or the other of a ratio (a client stall, not the broker's time)
    for p in partitions:
        consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions])
    at_end: set[int] = set()
    consumer.list_topics(args.topic, timeout=30)  # connected before the producer is told to start
    print(READY, flush=True)
    got = size = 0
    latencies_us: list[int] = []
    start = end = time.monotonic()  # from connected to the last record
    cpu = time.process_time()
    deadline = start + DEADLINE_S
    # consume() returns once its batch is full or the wait is over, even after the partition's
    # end: the wait is the resolution of the arrival times and of the last record's (a 0.2 s
    # wait added up to 0.2 s to every fetch measurement)
    wait = 0.001 if args.latency else 0.01
    while (got < args.count and len(at_end) < len(partitions) and time.monotonic() < deadline
           and time.monotonic() - end < IDLE_S):
        batch = consumer.consume(10_000, wait)
        arrived = now_ns()
        before = got
        for message in batch:
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            value = message.value()
            got += 1
            size += len(value)
            if args.latency:
                latencies_us.append((arrived - STAMP.unpack_from(value)[0]) // 1000)
        # the last record's arrival ends the measurement, not the end-of-partition event: that
        # comes from a fetch at the end, which waits out fetch.wait.max.ms (500 ms) on any
        # broker (a reader that cannot count its records, read_committed's, met it every time)
        if got > before:
            end = time.monotonic()
    cpu = time.process_time() - cpu
    consumer.close()
    return {"records": got, "failed": 0, "bytes": size, "start": start, "end": end,
            "cpu_s": cpu, "latencies_us": latencies_us}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True, help="records, this process")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--partitions", type=int, default=1, help="produce round-robin to")
    parser.add_argument("--run", type=int, default=0,
                        help="records in a row to one partition (0: 16 KiB worth)")
    parser.add_argument("--partition-list", default="0", help="consume from, comma-separated")
    parser.add_argument("--producers", type=int, default=1, help="clients in this process")
    parser.add_argument("--rate", type=float, default=0, help="records/s per producer, 0: max")
    parser.add_argument("--stamp", action="store_true", help="send time in the value")
    parser.add_argument("--latency", action="store_true", help="report each record's latency")
    parser.add_argument("--until-eof", action="store_true", help="consume: stop at the end")
    parser.add_argument("--isolation", default="read_committed",
                        choices=["read_committed", "read_uncommitted"],
                        help="consume: isolation.level (librdkafka's default: read_committed)")
    parser.add_argument("--idempotent", action="store_true", help="enable.idempotence")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting of every client (security.protocol, ...)")
    parser.add_argument("--commit-ms", type=int, default=0,
                        help="transactional: commit every this many ms (0: no transactions)")
    parser.add_argument("--txn-records", type=int, default=0,
                        help="transactional: end a transaction every this many records")
    parser.add_argument("--abort-every", type=int, default=0,
                        help="with --txn-records: abort every this-many-th transaction")
    args = parser.parse_args(argv)
    try:
        result = Producers(args).run() if args.mode == "produce" else consume(args)
    except (KafkaException, TimeoutError) as exc:
        result = {"error": str(exc)}
    print(json.dumps(result), flush=True)
    sys.exit(0 if "error" not in result else 1)


if __name__ == "__main__":
    main()
