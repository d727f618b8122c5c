"""The reference pipeline (issue 22): ``python -m commitgate.pipeline.demo`` / ``commitgate pipeline demo``.

Starts a broker (unless given one), produces click events into a topic (pipeline/clicks.py), runs
the Structured Streaming job that counts clicks per page in event-time windows and writes them to
a result topic (pipeline/window_counts.py), and shows the result topic as a live table
(pipeline/result_board.py) until Ctrl-C or --duration; then stops everything it started.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError
from pyspark.errors import PySparkException
from pyspark.sql.streaming import StreamingQuery
from rich.console import Console
from rich.live import Live

from commitgate.launcher import BrokerProcess
from commitgate.pipeline.clicks import ClickGenerator
from commitgate.pipeline.result_board import Progress, ResultBoard, result_line
from commitgate.pipeline.window_counts import (
    OutputMode,
    WindowCount,
    demo_session,
    start_counts_query,
    stop_between_batches,
)

POLL_MS = 250  # how long one read of the result topic waits; also the table's refresh period
STATUS_EVERY_S = 10.0  # --no-live: a progress line this often
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

app = typer.Typer(add_completion=False)


class DemoError(Exception):
    """Why the demo stopped early; the message is shown to the user as it is."""


@dataclass(frozen=True)
class DemoSettings:
    bootstrap: str | None
    rate: float
    seed: int
    window: str
    watermark: str
    trigger: str
    output_mode: str
    duration: float | None
    live: bool
    master: str
    input_topic: str
    result_topic: str
    partitions: int
    checkpoint: Path | None


@dataclass
class Pipeline:
    """The running parts the display watches."""
    generator: ClickGenerator
    query: StreamingQuery
    consumer: KafkaConsumer
    board: ResultBoard

    def check(self) -> None:
        """Raise DemoError when the generator or the query has stopped by itself."""
        if self.generator.error is not None:
            raise DemoError(f"the click generator stopped: {self.generator.error!r} "
                            "(traceback in the log above)")
        if not self.query.isActive:
            error = self.query.exception()
            reason = _first_line(error) if error else "stopped"
            raise DemoError(f"the streaming query stopped: {reason}")

    def read_results(self) -> list[WindowCount]:
        """Wait up to POLL_MS for new result records and add them to the board."""
        batches = self.consumer.poll(timeout_ms=POLL_MS)
        results = [WindowCount.from_value(r.value) for rs in batches.values() for r in rs]
        self.board.add(results)
        return results

    def progress(self) -> Progress:
        last, status = self.query.lastProgress, self.query.status["message"]
        if not last:
            return Progress(self.generator.produced, self.board.results, 0, None, status)
        return Progress(self.generator.produced, self.board.results, last["batchId"] + 1,
                        _watermark_ms(last["eventTime"].get("watermark")), status)


def _watermark_ms(text: str | None) -> int | None:
    # Spark reports the epoch itself until the first event time has been seen
    millis = int(datetime.fromisoformat(text).timestamp() * 1000) if text else 0
    return millis or None


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    # a child inherits the blocked signal: Ctrl-C in the terminal then reaches only the demo,
    # which stops the broker itself, after the query that writes to it
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    # a child started meanwhile (Spark's JVM) keeps writing its console log to the file, where
    # it does not tear the live table
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def own_broker(workdir: Path, console: Console) -> Iterator[str]:
    """A broker subprocess on a free port with its data in workdir."""
    broker = BrokerProcess(workdir / "data", log_path=workdir / "broker.log")
    try:
        try:
            with _sigint_blocked():
                broker.start()
        except RuntimeError as exc:  # it exited or did not listen
            raise DemoError(f"could not start a broker: {exc}") from None
        console.print(f"broker: started at {broker.bootstrap} (pid {broker.process.pid})")
        yield broker.bootstrap
    finally:  # also when a Ctrl-C held back during its start arrives right after
        if broker.process is not None:
            code = broker.stop()
            console.print(f"broker: exited with {code}:\n{broker.log_tail()}" if code
                          else "broker: stopped")


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    """Create those of the topics (name -> partition count) that do not exist yet."""
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    except KafkaError as exc:
        raise DemoError(f"no broker reachable at {bootstrap}: {exc}") from None
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(name, count, 1) for name, count in partitions.items()
                   if name not in existing]
        if missing:
            admin.create_topics(missing)
    finally:
        admin.close()


def result_consumer(bootstrap: str, topic: str) -> KafkaConsumer:
    """A consumer of every partition of the result topic from its beginning, without a group."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, isolation_level="read_committed")
    partitions = consumer.partitions_for_topic(topic) or set()
    assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    return consumer


def watch_live(pipeline: Pipeline, console: Console, until: Callable[[], bool]) -> None:
    """Redraw the table of the latest windows after every read of the result topic."""
    try:
        with Live(pipeline.board.view(pipeline.progress()), console=console,
                  refresh_per_second=4) as live:
            while not until():
                pipeline.check()
                pipeline.read_results()
                live.update(pipeline.board.view(pipeline.progress()))
    finally:
        if not console.is_terminal:  # Live ends its last frame with a newline only on terminals
            console.line()


def watch_lines(pipeline: Pipeline, console: Console, until: Callable[[], bool]) -> None:
    """Print each result record as a line, and the progress now and then."""
    next_status = time.monotonic() + STATUS_EVERY_S
    while not until():
        pipeline.check()
        for result in pipeline.read_results():
            console.print(result_line(result), highlight=False)
        if time.monotonic() >= next_status:
            console.print(pipeline.progress().describe(), highlight=False)
            next_status += STATUS_EVERY_S


@dataclass
class Deadline:
    """Due `duration` seconds after the query's first micro-batch (Spark's start not counted)."""
    duration: float | None
    query: StreamingQuery
    end: float | None = None

    def __call__(self) -> bool:
        if self.duration is None:
            return False
        if self.end is None and self.query.lastProgress:
            self.end = time.monotonic() + self.duration
        return self.end is not None and time.monotonic() >= self.end


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


def _start(stack: ExitStack, settings: DemoSettings, console: Console) -> Pipeline:
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="commitgate-demo-")))
    console.print(f"work directory {workdir} (logs, broker data, checkpoint; removed at exit)")
    bootstrap = settings.bootstrap or stack.enter_context(own_broker(workdir, console))
    create_topics(bootstrap, {settings.input_topic: settings.partitions,
                              settings.result_topic: 1})
    checkpoint = settings.checkpoint or workdir / "checkpoint"
    console.print(f"spark: starting {settings.master}, its log in spark.log ...")
    try:
        sigint = signal.getsignal(signal.SIGINT)
        with _stderr_to(workdir / "spark.log"):
            spark = demo_session(settings.master)
        stack.callback(spark.stop)
        # PySpark's own handler cancels every job on Ctrl-C, failing the running micro-batch;
        # the demo stops the query between micro-batches instead
        signal.signal(signal.SIGINT, sigint)
        query = start_counts_query(spark, bootstrap, settings.input_topic,
                                   settings.result_topic, str(checkpoint), settings.window,
                                   settings.watermark, settings.trigger, settings.output_mode)
    except PySparkException as exc:
        raise DemoError(f"the streaming query did not start: {_first_line(exc)}") from None
    stack.callback(stop_between_batches, query)
    console.print(f"spark: query counting clicks per page in {settings.window} windows "
                  f"(watermark {settings.watermark}) from '{settings.input_topic}' to "
                  f"'{settings.result_topic}', checkpoint {checkpoint}")
    generator = ClickGenerator(bootstrap, settings.input_topic, settings.rate, settings.seed)
    stack.callback(generator.stop)
    generator.start()
    console.print(f"clicks: {settings.rate:,g} events/s into '{settings.input_topic}' "
                  f"(seed {settings.seed})")
    consumer = result_consumer(bootstrap, settings.result_topic)
    stack.callback(consumer.close)
    return Pipeline(generator, query, consumer, ResultBoard())


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(settings: DemoSettings, console: Console) -> int:
    """Run the reference pipeline until Ctrl-C, SIGTERM or settings.duration: the exit code."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    # SIGTERM (kill, timeout) stops the demo as Ctrl-C does, with the broker and Spark
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as stack:
            try:
                pipeline = _start(stack, settings, console)
                watch = watch_live if settings.live else watch_lines
                watch(pipeline, console, Deadline(settings.duration, pipeline.query))
                console.print(f"done: {pipeline.progress().describe()}", highlight=False)
            except KeyboardInterrupt:
                console.print("interrupted")
            finally:
                # a second signal must not leave the query, Spark or the broker half stopped
                for sig in STOP_SIGNALS:
                    signal.signal(sig, signal.SIG_IGN)
                console.print("stopping ...")
        return 0
    except DemoError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@app.command(help="The reference pipeline: click events into a topic, a Spark Structured "
                  "Streaming job counting clicks per page in event-time windows into a result "
                  "topic, and the live result table, until Ctrl-C or --duration. Starts its own "
                  "broker (data in a temporary directory) unless --bootstrap is given.")
def demo(
    bootstrap: Annotated[str | None, typer.Option(
        help="HOST:PORT of a running broker; default: start one on a free port")] = None,
    rate: Annotated[float, typer.Option(help="click events per second")] = 1000.0,
    seed: Annotated[int, typer.Option(help="seed of the events' users and pages")] = 1,
    window: Annotated[str, typer.Option(help="tumbling event-time window")] = "10 seconds",
    watermark: Annotated[str, typer.Option(
        help="how late an event may be and still be counted")] = "10 seconds",
    trigger: Annotated[str, typer.Option(help="micro-batch interval")] = "1 second",
    output_mode: Annotated[OutputMode, typer.Option(
        help="update: every changed count, each micro-batch (through foreachBatch and the batch "
             "sink); append: each window once, final, when the watermark passes its end "
             "(the exactly-once streaming sink)")] = OutputMode.update,
    duration: Annotated[float | None, typer.Option(
        help="seconds to run after the first micro-batch; default: until Ctrl-C")] = None,
    live: Annotated[bool, typer.Option(
        help="a live table; --no-live prints each result as a line (logs)")] = True,
    master: Annotated[str, typer.Option(
        help="Spark master; a cluster needs --bootstrap reachable from its executors")
    ] = "local[2]",
    input_topic: Annotated[str, typer.Option(help="topic of the click events")] = "clicks",
    result_topic: Annotated[str, typer.Option(help="topic of the counts")] = "click-counts",
    partitions: Annotated[int, typer.Option(min=1, help="partitions of a new input topic")] = 2,
    checkpoint: Annotated[Path | None, typer.Option(
        help="the query's checkpoint directory (kept: a rerun resumes); default: a "
             "temporary one")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python warns of its slow polls on a loaded machine, and py4j logs the failure of a
    # micro-batch interrupted by a stop; real failures stop the query and are reported by check()
    logging.getLogger("kafka").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    if rate <= 0:
        raise typer.BadParameter(f"must be above 0, got {rate}", param_hint="--rate")
    settings = DemoSettings(bootstrap, rate, seed, window, watermark, trigger, output_mode.value,
                            duration, live, master, input_topic, result_topic, partitions,
                            checkpoint)
    raise typer.Exit(run_demo(settings, Console(soft_wrap=True)))  # lines stay whole in logs


if __name__ == "__main__":
    app()
