"""What the broker benchmark measures, and how one measurement of one workload on one broker
runs: load generator processes (``bench/loadgen.py``) started together, their JSON lines
merged into figures and an account of records sent, acknowledged and consumed."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from commitgate.bench.targets import Target
from commitgate.launcher.children import parent_death_signal

GENERATOR_TIMEOUT_S = 600
PRODUCE, FETCH, LATENCY = "produce", "fetch", "latency"


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # PRODUCE (with rate: many connections, ack latency), FETCH or LATENCY
    count: int  # records a measurement sends (LATENCY: per second of offered load)
    size: int = 1024
    acks: str = "1"
    partitions: int = 1
    processes: int = 1  # generator processes
    producers: int = 1  # clients in each producing process
    rate: float = 0  # records/s per producer; 0: as fast as the broker takes them
    consumers: int = 1  # FETCH: consumer processes, one partition each
    seconds: float = 0  # LATENCY: how long the offered load lasts
    sync_flush: bool = False  # also measured on the SYNC_FLUSH CommitGate
    idempotent: bool = False  # PRODUCE: enable.idempotence (with acks=all)
    commit_ms: int = 0  # PRODUCE: transactional, a commit every this many ms
    txn_records: int = 0  # FETCH: the backlog is written in transactions of this many records,
    abort_every: int = 0  # every this-many-th of them aborted
    isolation: str = "read_committed"  # FETCH: the consumer's (librdkafka's default)
    versus: str = ""  # the workload this one is held against, measured beside it round by round
    goal: float = 0  # the least share of ``versus``'s MB/s this one should keep

    @property
    def topic_partitions(self) -> int:
        return self.consumers if self.kind == FETCH else self.partitions

    @property
    def transactional(self) -> bool:
        return bool(self.commit_ms or self.txn_records)


@dataclass
class Measurement:
    figures: dict[str, float]
    sent: int
    acked: int
    consumed: int | None  # None: this workload reads nothing back
    seconds: float
    generator_cpu_s: float
    broker_cpu_s: float | None = None
    others_cpu_s: float | None = None  # the other brokers' CPU meanwhile (background work)
    settle_s: float = 0.0  # waited, untimed, for every broker to go idle before the start
    error: str = ""
    aborted: int = 0  # of the records acknowledged (FETCH: in the backlog), those aborted
    skipped: str = ""  # why this broker cannot run the workload (nothing was measured)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _generator(target: Target, mode: str, topic: str, count: int, **options) -> list[str]:
    args = [sys.executable, "-m", "commitgate.bench.loadgen", mode, "--bootstrap", target.bootstrap,
            "--topic", topic, "--count", str(count)]
    for key, value in options.items():
        if value is True:
            args.append(f"--{key.replace('_', '-')}")
        elif value is not False:
            args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def _start(args: list[str]) -> subprocess.Popen:
    """A load generator, killed by the kernel if the benchmark dies."""
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=parent_death_signal())  # noqa: PLW1509


def _collect(processes: Iterable[subprocess.Popen]) -> list[dict]:
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=GENERATOR_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines else {"error": err[-500:] or "no output"})
    return results


def _window(results: list[dict]) -> float:
    """Wall time from the first process's start to the last one's end (a shared clock)."""
    return max(1e-6, max(r["end"] for r in results) - min(r["start"] for r in results))


def _percentiles(latencies_us: list[int], names: dict[str, float]) -> dict[str, float]:
    if len(latencies_us) < 2:
        return {}
    cuts = statistics.quantiles(latencies_us, n=1000, method="inclusive")
    return {name: cuts[int(q * 1000) - 1] / 1000 for name, q in names.items()}  # in ms


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


def produce(target: Target, workload: Workload, topic: str) -> Measurement:
    """Producers in ``processes`` processes; with a rate, each record's ack latency too."""
    counts = _split(workload.count, workload.processes)
    results = _collect([_start(_generator(
        target, "produce", topic, count, size=workload.size, acks=workload.acks,
        partitions=workload.partitions, producers=workload.producers, rate=workload.rate,
        latency=workload.rate > 0, idempotent=workload.idempotent,
        commit_ms=workload.commit_ms, txn_records=workload.txn_records,
        abort_every=workload.abort_every)) for count in counts])
    return _merge(workload, results, consumed=None, latency_from=results)


def transactions_missing(target: Target, topic: str) -> str:
    """Untimed: why the broker's transactions do not work ('' if they do): a transaction of one
    record committed and one aborted, read back with read_committed (a broker may accept
    the transactional requests but not hide an aborted transaction's records)."""
    (written,) = _collect([_start(_generator(target, "produce", topic, 2, acks="all",
                                             idempotent=True, txn_records=1, abort_every=2))])
    if "error" in written:
        return written["error"]
    (read,) = _collect([_start(_generator(target, "consume", topic, 2, until_eof=True))])
    if "error" in read or read["records"] != 1:
        return read.get("error") or (f"read_committed returned {read['records']} records of "
                                     "one committed and one aborted transaction")
    return ""


def warm_partitions(target: Target, topic: str, partitions: int) -> None:
    """Untimed: one record to every partition, so a measurement sees the steady state (a
    partition's ConsumeQueue file is created on its first record, as bench.store warms its
    partitions too); brokers that create their files with the topic pay nothing extra."""
    _collect([_start(_generator(target, "produce", topic, partitions, partitions=partitions,
                                run=1))])


def fetch(target: Target, workload: Workload, topic: str, backlog: Measurement) -> Measurement:
    """``consumers`` processes read the backlog to its end, one partition each (a fetch of
    several partitions at once stalls noida-db 0.2.2: it serves one of them only)."""
    results = _collect([_start(_generator(
        target, "consume", topic, backlog.acked, until_eof=True, partition_list=partition,
        isolation=workload.isolation)) for partition in range(workload.consumers)])
    measurement = _merge(workload, results, consumed=None, latency_from=[])
    measurement.sent, measurement.acked = backlog.sent, backlog.acked
    measurement.aborted = backlog.aborted
    return measurement


def read_back(target: Target, topic: str, partitions: int, count: int) -> int:
    """Untimed: how many records (up to ``count``) a consumer finds in the topic."""
    (result,) = _collect([_start(_generator(
        target, "consume", topic, count, until_eof=True,
        partition_list=",".join(map(str, range(partitions)))))])
    return result.get("records", 0)


def latency(target: Target, workload: Workload, topic: str, per_second: float) -> Measurement:
    """One producer at ``per_second`` stamping send times; one consumer computing delays."""
    count = max(1, int(per_second * workload.seconds))
    consumer = _start(_generator(target, "consume", topic, count, latency=True))
    consumer.stdout.readline()  # "ready", or nothing if it failed: the collect shows why
    producer = _start(_generator(target, "produce", topic, count, size=workload.size,
                                 acks=workload.acks, rate=per_second, stamp=True))
    sent, received = _collect([producer, consumer])
    if "error" in received or "error" in sent:
        return _merge(workload, [sent, received], consumed=None, latency_from=[])
    measurement = _merge(workload, [sent], consumed=received["records"],
                         latency_from=[received])
    measurement.generator_cpu_s += received["cpu_s"]
    measurement.figures["offered records/s"] = per_second
    return measurement


def _merge(workload: Workload, results: list[dict], consumed: int | None,
           latency_from: list[dict]) -> Measurement:
    errors = [r["error"] for r in results if "error" in r]
    cpu = sum(r.get("cpu_s", 0.0) for r in results)
    if errors:
        return Measurement({}, workload.count, 0, consumed, 0.0, cpu, error=errors[0])
    records = sum(r["records"] for r in results)
    seconds = _window(results)
    figures = {"MB/s": sum(r["bytes"] for r in results) / seconds / 1e6,
               "records/s": records / seconds}
    latencies = [us for r in latency_from for us in r["latencies_us"]]
    figures.update(_percentiles(latencies, {"p50 ms": 0.5, "p99 ms": 0.99, "p999 ms": 0.999}))
    if workload.commit_ms:
        figures["commits/s"] = sum(r["transactions"] for r in results) / seconds
    if workload.kind == FETCH:  # the caller fills in what the backlog's producer sent
        return Measurement(figures, 0, 0, records, seconds, cpu)
    failed = sum(r["failed"] for r in results)
    return Measurement(figures, records + failed, records, consumed, seconds, cpu,
                       aborted=sum(r["aborted"] for r in results))

