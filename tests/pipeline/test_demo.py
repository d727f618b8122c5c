"""The reference pipeline (pipeline/demo.py): click generator, windowed counts query, the CLI.

The counts written by the query are checked against counts computed here from the input topic
as a consumer reads it; the CLI runs as a subprocess with its own broker.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from commitgate.pipeline.clicks import PAGES, ClickEvent, ClickGenerator, click_events
from commitgate.pipeline.demo import create_topics, result_consumer
from commitgate.pipeline.result_board import Progress, ResultBoard
from commitgate.pipeline.window_counts import WindowCount, start_counts_query, stop_between_batches

BASE_MS = 1_700_000_000_000  # a whole second: 1-second windows start on it
WINDOW_MS = 1000
LATENESS_MS = 300  # under the watermark delay, so every generated event counts
WAIT_S = 240.0  # a micro-batch on a loaded 2-core machine can take tens of seconds
Counts = dict[tuple[int, str], int]


def window_counts(events: list[ClickEvent]) -> Counts:
    return dict(Counter((e.ts - e.ts % WINDOW_MS, e.page) for e in events))


def read_topic(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of a topic, partition by partition, as a consumer reads them."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        values = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic} not read to its end in time"
            values += [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        return values
    finally:
        consumer.close()


class Results:
    """The result topic as read so far: every record of each key, in topic order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = result_consumer(bootstrap, topic)
        self.history: dict[tuple[int, str], list[int]] = defaultdict(list)

    def poll(self) -> None:
        for records in self.consumer.poll(timeout_ms=250).values():
            for record in records:
                count = WindowCount.from_value(record.value)
                assert record.key == b"%d:%s" % (count.window_start, count.page.encode())
                assert count.window_end == count.window_start + WINDOW_MS
                self.history[(count.window_start, count.page)].append(count.clicks)

    def latest(self) -> Counts:
        return {key: counts[-1] for key, counts in self.history.items()}


def wait_until(condition: Callable[[], bool], poll: Callable[[], None], what: str,
               explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {WAIT_S}s: {explain()}"
        poll()


def produce_clicks(bootstrap: str, topic: str, seed: int, start_ms: int, count: int) -> None:
    generator = ClickGenerator(bootstrap, topic, rate=1000, seed=seed, start_ms=start_ms,
                               limit=count, max_lateness_ms=LATENESS_MS).start()
    assert generator.join(60), "the generator did not finish its events"
    assert generator.error is None and generator.produced == count


def send(bootstrap: str, topic: str, event: ClickEvent) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        producer.send(topic, key=event.key(), value=event.value()).get(30)
    finally:
        producer.close()


def state_rows(query) -> int | None:
    """The windows and pages the aggregation still keeps, as of the last micro-batch."""
    last = query.lastProgress
    return last["stateOperators"][0]["numRowsTotal"] if last and last["stateOperators"] else None


@pytest.mark.timeout(900)  # micro-batches of a loaded 2-core machine
def test_windowed_counts_match_the_generated_events(spark, broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"demo-clicks": 2, "demo-counts": 1})
    results = Results(bootstrap, "demo-counts")
    query = start_counts_query(spark, bootstrap, "demo-clicks", "demo-counts",
                               str(tmp_path / "checkpoint"), window="1 second",
                               watermark="1 second", trigger="200 milliseconds")
    try:
        def expect(counts: Counts, what: str) -> None:
            wait_until(lambda: results.latest() == counts, results.poll, what,
                       lambda: f"expected {counts}, read {results.latest()}, "
                               f"progress {query.lastProgress}")

        # phase 1: 2 s of event time; the watermark ends up 1 s behind its last event
        produce_clicks(bootstrap, "demo-clicks", 7, BASE_MS, 2000)
        first = window_counts([ClickEvent.from_value(v)
                               for v in read_topic(bootstrap, "demo-clicks")])
        expect(first, "the counts of the first 2,000 events")
        # phase 2 starts inside the last window of phase 1, still open: it gets updated
        produce_clicks(bootstrap, "demo-clicks", 8, BASE_MS + 1500, 2000)
        events = [ClickEvent.from_value(v) for v in read_topic(bootstrap, "demo-clicks")]
        # the generator is reproducible: the topic holds exactly the two seeded streams
        assert sorted(events, key=lambda e: (e.ts, e.user, e.page)) == sorted(
            [*islice(click_events(7, BASE_MS, 1000, LATENESS_MS), 2000),
             *islice(click_events(8, BASE_MS + 1500, 1000, LATENESS_MS), 2000)],
            key=lambda e: (e.ts, e.user, e.page))
        total = window_counts(events)
        # one event far ahead moves the watermark past every window above: all of them close
        ahead = ClickEvent("user-ahead", "/home", BASE_MS + 60_000)
        send(bootstrap, "demo-clicks", ahead)
        expect({**total, (ahead.ts, ahead.page): 1}, "the counts of all 4,001 events")
        updated = [key for key in first if total[key] != first[key]]
        assert updated, "phase 2 added no clicks to an open window"
        for key in updated:  # update mode: the phase-1 count, later the total
            assert results.history[key][-1] == total[key]
            assert first[key] in results.history[key][:-1]

        # every window above is closed: the query's state holds only the one far ahead
        wait_until(lambda: state_rows(query) == 1, results.poll,
                   "the windows before the one far ahead closed", lambda: str(query.lastProgress))
        assert results.latest() == {**total, (ahead.ts, ahead.page): 1}
    finally:
        results.consumer.close()
        stop_between_batches(query)
    assert query.exception() is None


@pytest.mark.timeout(900)
def test_append_mode_writes_each_closed_window_once(spark, broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"append-clicks": 2, "append-counts": 1})
    results = Results(bootstrap, "append-counts")
    produce_clicks(bootstrap, "append-clicks", 9, BASE_MS, 2000)
    expected = window_counts([ClickEvent.from_value(v)
                              for v in read_topic(bootstrap, "append-clicks")])
    send(bootstrap, "append-clicks", ClickEvent("user-ahead", "/home", BASE_MS + 60_000))
    query = start_counts_query(spark, bootstrap, "append-clicks", "append-counts",
                               str(tmp_path / "checkpoint"), window="1 second",
                               watermark="1 second", trigger="200 milliseconds",
                               output_mode="append")
    try:
        # the window far ahead stays open: it is never written
        wait_until(lambda: results.latest() == expected, results.poll,
                   "the counts of every closed window",
                   lambda: f"expected {expected}, read {results.latest()}")
        wait_until(lambda: state_rows(query) == 1, results.poll, "the windows evicted",
                   lambda: str(query.lastProgress))
        results.poll()
        assert all(len(counts) == 1 for counts in results.history.values()), results.history
        assert results.latest() == expected
    finally:
        results.consumer.close()
        stop_between_batches(query)
    assert query.exception() is None


def test_generator_failure_is_logged_and_kept(broker, caplog):
    generator = ClickGenerator(broker.bootstrap, "not a topic name!", rate=100, seed=1,
                               limit=10).start()
    assert generator.join(60), "a failing generator did not stop"
    assert "Unknown topic" in str(generator.error)
    assert "the click generator for topic not a topic name! failed" in caplog.text
    assert "Traceback" in caplog.text


def test_click_events_are_reproducible():
    first = list(islice(click_events(3, BASE_MS, 500, 2000), 5000))
    assert first == list(islice(click_events(3, BASE_MS, 500, 2000), 5000))
    assert first != list(islice(click_events(4, BASE_MS, 500, 2000), 5000))
    for i, event in enumerate(first):
        due = BASE_MS + i * 2  # 500 events/s: one every 2 ms
        assert due - 2000 <= event.ts <= due and event.page in PAGES
    assert 0 < sum(e.ts != BASE_MS + i * 2 for i, e in enumerate(first)) < 500  # a few late
    assert ClickEvent.from_value(first[0].value()) == first[0]
    assert first[0].key() == first[0].user.encode()


def test_board_shows_latest_count_of_the_newest_windows():
    board = ResultBoard()
    board.add([WindowCount(start, start + 10, page, clicks) for start, page, clicks in
               [(0, "/a", 1), (10, "/a", 5), (20, "/b", 2), (30, "/a", 3), (30, "/b", 4),
                (30, "/a", 7)]])
    assert [(c.window_start, c.page, c.clicks) for c in board.latest()] == [
        (30, "/a", 7), (30, "/b", 4), (20, "/b", 2), (10, "/a", 5)]
    assert board.results == 6
    progress = Progress(100, 6, 3, 20, "Waiting for data to arrive")
    assert "micro-batches 3" in progress.describe()
    assert board.table(progress).row_count == 4


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.timeout(900)
def test_demo_command_runs_and_cleans_up():
    process = subprocess.Popen(
        [sys.executable, "-m", "commitgate.pipeline.demo", "--duration", "20", "--no-live", "--rate",
         "200"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)  # its own group: a timeout kills the broker and Spark too
    try:
        output, _ = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the demo did not finish in 600 s:\n{output}")
    assert process.returncode == 0, output
    rows = re.findall(r"^window \d\d:\d\d:\d\d-\d\d:\d\d:\d\d  page (/\w+) +clicks (\d+)$",
                      output, re.MULTILINE)
    assert rows and {page for page, _ in rows} <= set(PAGES), output
    assert "done: events produced" in output and "broker: stopped" in output, output
    assert "Traceback" not in output and "Exception" not in output, output
    pid = int(re.search(r"broker: started at \S+ \(pid (\d+)\)", output).group(1))
    workdir = Path(re.search(r"work directory (\S+)", output).group(1))
    assert _gone(pid), f"broker {pid} still running"
    assert not workdir.exists()
