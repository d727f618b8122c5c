"""``commitgate bench pipeline``: the `commitgate` Spark source's batch read beside one
confluent-kafka consumer process reading the same bytes, and where the source's time goes.

One topic (default 1 GiB of 1 KiB values in 4 partitions) is produced once, by a librdkafka load
generator (``bench/loadgen.py``), into a CommitGate this run starts (or the broker at
``--bootstrap``, where a topic already holding exactly those records is reused). Then, after
one untimed warm-up read (JVM start, Python workers forked), rounds alternate: one
confluent-kafka consumer process reads every partition to the end, and Spark (``local[2]``)
runs ``sum(length(value))`` over the source, timed around the action; the best round of each
is compared with the issue's target (the source at least half the consumer's MB/s). A last,
untimed Spark read runs under py-spy to show where the executors' time goes.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from commitgate.bench import topics
from commitgate.bench.targets import CLOCK_TICKS, start_commitgate

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

TARGET_RATIO = 0.5  # issue 22: the Spark read reaches at least half of one consumer's MB/s
READ_TIMEOUT_S = 600.0
PRODUCE_TIMEOUT_S = 1800.0
SAMPLES_PER_S = 100
CLICK_PARTITIONS = 4
LATENCY_WARMUP_S = 15.0  # the first micro-batches compile and warm up: not measured (default)
# the source's executor reader fetches this much per partition; the consumer gets the same
FETCH_BYTES = 8 << 20
# py-spy frames that say which part of the executors' work a sample belongs to, first match wins
PARTS = (("Arrow columns (pa.array over the messages)", ("_BatchBuilder.flush",)),
         ("Kafka client (librdkafka consume, open, close)", ("_fetch", "read_range")),
         ("Spark: Arrow batches to the JVM", ("dump_stream",)))
NO_PROFILE = ("py-spy not installed (pip install -e '.[bench]') or no samples of the "
              "Python workers in the profiled read")
OTHER_PART = "Spark: task start and end (imports, gc.collect after each task)"


@dataclass
class Read:
    """One timed read of the whole topic."""
    seconds: float
    bytes: int

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6


@dataclass
class Report:
    size_bytes: int
    records: int
    source: list[Read] = field(default_factory=list)
    consumer: list[Read] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)  # process group: CPU seconds
    shares: dict[str, float] = field(default_factory=dict)  # executor part: share of samples
    latency: Latency | None = None

    @property
    def ratio(self) -> float:
        return best(self.source) / best(self.consumer)


def best(reads: list[Read]) -> float:
    return max(r.mb_s for r in reads)


# --- the topic ----------------------------------------------------------------------------

def topic_name(records: int, value_bytes: int, partitions: int) -> str:
    return f"bench-pipeline-{records}x{value_bytes}-p{partitions}"


def records_in(bootstrap: str, topic: str, partitions: int) -> int | None:
    """Records in the topic's partitions, None if it has not exactly ``partitions``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commitgate-bench",
                         "log_level": 3})
    try:
        found = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if found is None or found.error is not None or len(found.partitions) != partitions:
            return None
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                 for p in range(partitions)]
        return sum(high - low for low, high in marks)
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, records: int, value_bytes: int,
            partitions: int) -> None:
    topics.create(bootstrap, topic, partitions)
    command = [sys.executable, "-m", "commitgate.bench.loadgen", "produce", "--bootstrap", bootstrap,
               "--topic", topic, "--count", str(records), "--size", str(value_bytes),
               "--partitions", str(partitions), "--acks", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PRODUCE_TIMEOUT_S,
                          check=False)
    if done.returncode:
        raise RuntimeError(f"producing {records} records to {topic} failed: "
                           f"{(done.stdout + done.stderr)[-500:]}")


# --- the two readers ----------------------------------------------------------------------

def consume_all(bootstrap: str, topic: str, partitions: int) -> Read:
    """One confluent-kafka consumer reading every partition from its start to its end; timed
    from opening the consumer, as the Spark read is timed from the action."""
    began = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commitgate-bench",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "max.partition.fetch.bytes": FETCH_BYTES, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    size, at_end = 0, set()
    deadline = began + READ_TIMEOUT_S
    while len(at_end) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.2):
            error = message.error()
            if error is None:
                size += len(message.value())
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
    seconds = time.monotonic() - began
    consumer.close()
    return Read(seconds, size)


def spark_session() -> SparkSession:
    """The demo's session (local[2], 2 shuffle partitions, quiet, commitgate registered)."""
    from commitgate.pipeline.window_counts import (
        demo_session,  # pyspark only when Spark runs: quick --help
    )

    return demo_session("local[2]", "commitgate-bench-pipeline")


def spark_read(spark: SparkSession, bootstrap: str, topic: str) -> Read:
    frame = (spark.read.format("commitgate").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load())
    began = time.monotonic()
    size = frame.selectExpr("sum(length(value)) AS bytes").collect()[0]["bytes"] or 0
    return Read(time.monotonic() - began, size)


# --- where the time goes ------------------------------------------------------------------

def _processes() -> dict[int, tuple[int, str, float]]:
    """pid: (parent, command line, CPU seconds) of every process on the machine."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone since the listing
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(entry)] = (int(fields[1]), command,
                             (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return found


def _descendants(root: int, table: dict[int, tuple[int, str, float]]) -> Iterator[int]:
    children = collections.defaultdict(list)
    for pid, (parent, _, _) in table.items():
        children[parent].append(pid)
    todo = list(children[root])
    while todo:
        pid = todo.pop()
        yield pid
        todo += children[pid]


def cpu_by_role(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of this process (the driver), Spark's JVM, its Python workers, and
    the broker when this run started it."""
    table = _processes()
    roles: dict[str, float] = collections.Counter()
    roles["Spark driver (Python)"] = table[os.getpid()][2]
    for pid in _descendants(os.getpid(), table):
        command = table[pid][1]
        if pid == broker_pid or "cli serve" in command:
            continue
        if "java" in command.split(" ", 1)[0]:
            roles["Spark JVM"] += table[pid][2]
        elif "pyspark" in command:
            roles["Python workers (the source's reads)"] += table[pid][2]
    if broker_pid is not None:
        roles["broker"] = sum(table[p][2] for p in [broker_pid, *_descendants(broker_pid, table)])
    return dict(roles)


def worker_daemon() -> int | None:
    """The pyspark.daemon that forks Spark's Python workers (present after the first read)."""
    table = _processes()
    daemons = {pid for pid in _descendants(os.getpid(), table)
               if "pyspark.daemon pyspark.worker" in table[pid][1]}
    return next((pid for pid in daemons if table[pid][0] not in daemons), None)


@contextmanager
def profiled(pid: int | None, out: Path) -> Iterator[None]:
    """py-spy on ``pid`` and its forked children while the block runs (raw collapsed stacks)."""
    if pid is None or shutil.which("py-spy") is None:
        yield
        return
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--subprocesses",
                            "--rate", str(SAMPLES_PER_S), "--nonblocking", "--format", "raw",
                            "--output", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached before the read starts
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.communicate()


def executor_shares(collapsed: str) -> dict[str, float]:
    """Shares of the Python workers' samples (on the CPU) in the Kafka client, in building the
    Arrow columns, and in Spark's own worker code; librdkafka's own threads are not sampled."""
    counts: dict[str, int] = collections.Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or "pyspark.daemon" not in stack.split(";")[0]:
            continue
        counts[_part(stack)] += int(count)
    total = sum(counts.values())
    return {part: n / total for part, n in counts.most_common()} if total else {}


def _part(stack: str) -> str:
    for part, markers in PARTS:
        if any(marker in stack for marker in markers):
            return part
    return OTHER_PART


# --- the demo's micro-batch latency --------------------------------------------------------

@dataclass
class Latency:
    """Produce time of each click (its record's CreateTime) to the arrival, in the result
    topic, of the counts of the micro-batch that read it."""
    rate: float  # clicks/s the generator reached
    events: int  # clicks measured (after the warm-up)
    unmatched: int  # measured clicks whose micro-batch's counts were not seen (dropped as late)
    batches: int
    median_ms: float
    p99_ms: float
    phases: dict[str, float]  # Spark's durationMs of a micro-batch with input: median ms


@dataclass(frozen=True)
class Batch:
    """One micro-batch with input, from the query's progress."""
    start_ms: int
    end_ms: int
    ends: dict[int, int]  # input partition: end offset (exclusive)


def watch_results(bootstrap: str, topic: str, stop: Event, out: Queue) -> None:
    """In its own process, so arrival times do not wait for the bench's GIL: (CreateTime ms,
    arrival ms) of every result record until told to stop."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commitgate-bench",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                         "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []
    while not stop.is_set():
        messages = consumer.consume(1000, 0.05)
        arrived = time.time() * 1000
        seen += [(m.timestamp()[1], arrived) for m in messages if m.error() is None]
    consumer.close()
    out.put(seen)


def produced(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, int]]:
    """(partition, offset, CreateTime ms) of every record in the topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commitgate-bench",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "log_level": 3})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records, at_end = [], set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(at_end) < partitions and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.2):
            if m.error() is None:
                records.append((m.partition(), m.offset(), m.timestamp()[1]))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    consumer.close()
    return records


def batches_of(progress: list, topic: str) -> list[Batch]:
    found = []
    for update in progress:
        if not update.numInputRows:
            continue
        start = datetime.fromisoformat(update.timestamp).timestamp()
        ends = json.loads(update.sources[0].endOffset)[topic]
        start_ms = int(start * 1000)
        found.append(Batch(start_ms, start_ms + update.durationMs["triggerExecution"],
                           {int(p): offset for p, offset in ends.items()}))
    return sorted(found, key=lambda b: b.start_ms)


def latencies(batches: list[Batch], results: list[tuple[int, float]],
              clicks: list[tuple[int, int, int]], since_ms: float) -> tuple[list[float], int]:
    """Each measured click's latency, and how many had no counts seen for their batch."""
    # a result record was produced while its micro-batch ran; the batch's counts are all in
    # the result topic when the last of them arrives
    arrival: dict[int, float] = {}
    for created, arrived in results:
        for index, batch in enumerate(batches):
            if batch.start_ms <= created <= batch.end_ms:
                arrival[index] = max(arrival.get(index, 0.0), arrived)
                break
    ends = {p: [b.ends.get(p, 0) for b in batches] for p in {p for p, _, _ in clicks}}
    measured, unmatched = [], 0
    for partition, offset, created in clicks:
        if created < since_ms:
            continue
        index = bisect.bisect_right(ends[partition], offset)  # the first batch ending after it
        if index in arrival:
            measured.append(arrival[index] - created)
        else:
            unmatched += 1
    return measured, unmatched


@contextmanager
def result_watcher(bootstrap: str, topic: str) -> Iterator[Callable[[], list]]:
    """watch_results() in a process of its own; yields the call that stops it and returns what
    it saw. The process is ended however the block ends."""
    spawn = multiprocessing.get_context("spawn")
    stop, out = spawn.Event(), spawn.Queue()
    watcher = spawn.Process(target=watch_results, args=(bootstrap, topic, stop, out),
                            daemon=True)
    watcher.start()

    def collect() -> list:
        stop.set()
        return out.get(timeout=READ_TIMEOUT_S)  # before join: a child joins after its put

    try:
        yield collect
    finally:
        watcher.join(READ_TIMEOUT_S if stop.is_set() else 0)
        if watcher.is_alive():
            watcher.terminate()
            watcher.join()


def generate_clicks(bootstrap: str, topic: str, rate: float, seconds: float) -> int:
    """The demo's click generator for ``seconds``, in a process of its own: in the bench's,
    Spark's py4j threads hold the GIL it needs for 10,000 sends a second."""
    from commitgate.pipeline.clicks import ClickGenerator

    generator = ClickGenerator(bootstrap, topic, rate, seed=22).start()
    generator.join(seconds)  # it runs until stopped: this is the wait
    generator.stop()
    if generator.error is not None:
        raise RuntimeError(f"the click generator failed: {generator.error}")
    return generator.produced


def demo_latency(spark: SparkSession, bootstrap: str, rate: float, seconds: float,
                 console: Console, warmup_s: float = LATENCY_WARMUP_S) -> Latency:
    from commitgate.pipeline.window_counts import start_counts_query, stop_between_batches

    name = f"bench-clicks-{int(time.time())}"
    topics.create(bootstrap, name, CLICK_PARTITIONS)
    topics.create(bootstrap, f"{name}-counts", 1)
    spawn = multiprocessing.get_context("spawn")
    with (ProcessPoolExecutor(1, mp_context=spawn) as generator,
          result_watcher(bootstrap, f"{name}-counts") as collect,
          tempfile.TemporaryDirectory(prefix="commitgate-bench-checkpoint-") as checkpoint):
        query = start_counts_query(spark, bootstrap, name, f"{name}-counts", checkpoint)
        sent = generator.submit(generate_clicks, bootstrap, name, rate,
                                warmup_s + seconds)
        step(console, f"demo at {rate:,.0f} clicks/s: {warmup_s:.0f} s warm-up, "
                      f"{seconds:.0f} s measured", lambda: _keep_running(sent, query))
        step(console, "demo: last micro-batches", lambda: stop_between_batches(query, 120))
        results = collect()
        progress = query.recentProgress
    clicks = produced(bootstrap, name, CLICK_PARTITIONS)
    first, last = min(c[2] for c in clicks), max(c[2] for c in clicks)
    batches = batches_of(progress, name)
    measured, unmatched = latencies(batches, results, clicks, first + warmup_s * 1000)
    if not measured:
        raise RuntimeError(f"no click's counts reached {name}-counts ({len(results)} results, "
                           f"{len(batches)} micro-batches)")
    return Latency(len(clicks) / max((last - first) / 1000, 1e-3), len(measured), unmatched,
                   len(batches), statistics.median(measured),
                   statistics.quantiles(measured, n=100)[98], phases(progress))


def phases(progress: list) -> dict[str, float]:
    """Where a micro-batch's time goes, as Spark reports it: the median of each phase."""
    durations = [update.durationMs for update in progress if update.numInputRows]
    names = sorted({name for duration in durations for name in duration},
                   key=lambda name: -statistics.median(d.get(name, 0) for d in durations))
    return {name: statistics.median(d.get(name, 0) for d in durations) for name in names}


def _keep_running(sent: Future, query: StreamingQuery) -> None:
    """Wait for the generator, failing early if the query stopped or the generator failed."""
    while not sent.done():
        if query.exception() is not None or not query.isActive:
            reason = str(query.exception()).splitlines()[0]  # the rest is the query's state
            raise RuntimeError(f"the counts query stopped: {reason}")
        time.sleep(0.2)
    sent.result()


# --- the run ------------------------------------------------------------------------------

@contextmanager
def broker_at(bootstrap: str | None, console: Console) -> Iterator[tuple[str, int | None]]:
    """The broker to read from: the one given, or a CommitGate started for this run."""
    if bootstrap:
        yield bootstrap, None
        return
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-pipeline-") as root:
        target = start_commitgate(Path(root))
        console.print(f"started CommitGate at {target.bootstrap}")
        try:
            yield target.bootstrap, target.pid
        finally:
            target.stop()


def step(console: Console, text: str, work: Callable[[], object]) -> object:
    """Long untimed work under a spinner with the time it has taken."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        progress.add_task(text, total=None)
        return work()


@dataclass(frozen=True)
class Settings:
    size_mib: int = 1024
    rounds: int = 3
    bootstrap: str | None = None  # None: start a CommitGate for the run
    rate: float = 10_000  # the demo's clicks/s
    latency_s: float = 30.0  # measured time of the demo, after its warm-up; 0: no demo
    warmup_s: float = LATENCY_WARMUP_S  # the demo's first seconds, not measured
    value_bytes: int = 1024
    partitions: int = 4


def run(settings: Settings, console: Console) -> Report:
    records = settings.size_mib * (1 << 20) // settings.value_bytes
    topic = topic_name(records, settings.value_bytes, settings.partitions)
    report = Report(records * settings.value_bytes, records)
    with broker_at(settings.bootstrap, console) as (address, broker_pid):
        if records_in(address, topic, settings.partitions) != records:
            step(console, f"producing {settings.size_mib} MiB to {topic}",
                 lambda: produce(address, topic, records, settings.value_bytes,
                                 settings.partitions))
        spark = step(console, "starting Spark (local[2])", spark_session)
        try:
            read_rounds(spark, address, topic, settings, broker_pid, report, console)
            report.shares = executor_profile(spark, address, topic, console)
            check(report)
            show(report, console)  # before the demo, which a loaded machine can make fail
            if settings.latency_s > 0:
                # the default keeps 100 progress updates: fewer than a long run's micro-batches
                spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
                report.latency = demo_latency(spark, address, settings.rate, settings.latency_s,
                                              console, settings.warmup_s)
                show_latency(report.latency, console)
        finally:
            spark.stop()
    return report


def read_rounds(spark: SparkSession, address: str, topic: str, settings: Settings,
                broker_pid: int | None, report: Report, console: Console) -> None:
    """A warm-up read, then rounds of: the consumer, then the source (CPU of the last kept)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as consumer_process:
        step(console, "warm-up read (untimed)", lambda: spark_read(spark, address, topic))
        for index in range(settings.rounds):
            label = f"round {index + 1}/{settings.rounds}"
            report.consumer.append(step(
                console, f"{label}: one confluent-kafka consumer",
                lambda: consumer_process.submit(consume_all, address, topic,
                                                settings.partitions).result(READ_TIMEOUT_S)))
            before = cpu_by_role(broker_pid)
            report.source.append(step(console, f"{label}: the commitgate source",
                                      lambda: spark_read(spark, address, topic)))
            after = cpu_by_role(broker_pid)
            report.cpu_s = {role: after[role] - before.get(role, 0.0) for role in after}


def executor_profile(spark: SparkSession, address: str, topic: str,
                     console: Console) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-profile-") as scratch:
        out = Path(scratch) / "executors.txt"
        with profiled(worker_daemon(), out):
            step(console, "profiled read (untimed)", lambda: spark_read(spark, address, topic))
        return executor_shares(out.read_text()) if out.exists() else {}


def check(report: Report) -> None:
    """Every read must have read the whole topic, or its MB/s mean nothing."""
    for name, reads in (("source", report.source), ("consumer", report.consumer)):
        wrong = [r.bytes for r in reads if r.bytes != report.size_bytes]
        if wrong:
            raise RuntimeError(f"the {name} read {wrong} bytes, not the topic's "
                               f"{report.size_bytes}")


def show(report: Report, console: Console) -> None:
    size = f"{report.size_bytes / (1 << 20):,.0f} MiB"
    table = Table(title=f"Batch read of {size} ({report.records:,} records, best and median of "
                        f"{len(report.source)} rounds)")
    for column in ("reader", "best MB/s", "median MB/s", "best s"):
        table.add_column(column, justify="left" if column == "reader" else "right")
    for name, reads in (("commitgate source, Spark local[2]", report.source),
                        ("one confluent-kafka consumer process", report.consumer)):
        table.add_row(name, f"{best(reads):,.1f}",
                      f"{statistics.median(r.mb_s for r in reads):,.1f}",
                      f"{min(r.seconds for r in reads):,.2f}")
    verdict = "met" if report.ratio >= TARGET_RATIO else "NOT met"
    table.add_row("ratio source / consumer", f"{report.ratio:.0%}", "",
                  f"target {TARGET_RATIO:.0%}: {verdict}")
    console.print(table)
    if report.cpu_s:
        cpu = Table(title="CPU seconds during the last timed source read")
        cpu.add_column("process")
        cpu.add_column("CPU s", justify="right")
        for role, seconds in sorted(report.cpu_s.items(), key=lambda item: -item[1]):
            cpu.add_row(role, f"{seconds:,.2f}")
        console.print(cpu)
    if report.shares:
        parts = Table(title="Python workers' samples in the profiled read (py-spy)")
        parts.add_column("part")
        parts.add_column("share", justify="right")
        for part, share in report.shares.items():
            parts.add_row(part, f"{share:.0%}")
        console.print(parts)
    else:  # py-spy is in the bench extra, not the test one; a tiny read may give no samples
        console.print(f"no profile of the Python workers: {NO_PROFILE}", markup=False)


def show_latency(latency: Latency, console: Console) -> None:
    table = Table(title="Demo micro-batch latency: produce to the counts in the result topic "
                        "(trigger 1 s, 10 s windows)")
    for column in ("clicks/s reached", "clicks measured", "micro-batches", "median ms",
                   "p99 ms", "not counted (late)"):
        table.add_column(column, justify="right")
    table.add_row(f"{latency.rate:,.0f}", f"{latency.events:,}", f"{latency.batches:,}",
                  f"{latency.median_ms:,.0f}", f"{latency.p99_ms:,.0f}", f"{latency.unmatched:,}")
    console.print(table)
    console.print("micro-batch phases (Spark's durationMs), median ms: " +
                  ", ".join(f"{name} {ms:,.0f}" for name, ms in latency.phases.items()))


def main(settings: Settings) -> Report:
    """``commitgate bench pipeline``: run, printing each part's table as it is done."""
    return run(settings, Console())


def _arguments(argv: list[str] | None) -> Settings:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m commitgate.bench.pipeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=defaults.size_mib,
                        help="MiB in the topic (1 KiB values, 4 partitions)")
    parser.add_argument("--rounds", type=int, default=defaults.rounds,
                        help="timed rounds of each reader (the best is compared)")
    parser.add_argument("--bootstrap", default=None,
                        help="read from this broker (default: start a CommitGate)")
    parser.add_argument("--rate", type=float, default=defaults.rate,
                        help="the demo's clicks/s for the latency figures")
    parser.add_argument("--latency-seconds", type=float, default=defaults.latency_s,
                        help="measured seconds of the demo, after a warm-up; 0: no demo")
    parser.add_argument("--warmup-seconds", type=float, default=defaults.warmup_s,
                        help="the demo's first seconds, not measured (the first micro-batches "
                             "compile and warm up)")
    args = parser.parse_args(argv)
    if args.size_mib < 1 or args.rounds < 1 or args.rate <= 0 or args.latency_seconds < 0 \
            or args.warmup_seconds < 0:
        parser.error("--size-mib and --rounds must be at least 1, --rate above 0, "
                     "--latency-seconds and --warmup-seconds not negative")
    return Settings(args.size_mib, args.rounds, args.bootstrap, args.rate, args.latency_seconds,
                    warmup_s=args.warmup_seconds)


if __name__ == "__main__":
    main(_arguments(None))
