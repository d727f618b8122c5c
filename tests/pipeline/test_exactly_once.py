"""The streaming sink's exactly-once scheme (pipeline/exactly_once.py) against a real broker:
a task attempt that died part way, retried; a Spark driver SIGKILLed mid-stream, restarted."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from kafka import KafkaConsumer, TopicPartition

from commitgate.pipeline.exactly_once import ATTEMPT_HEADER, MARKER_TOPIC_PREFIX, TaskIdentity
from commitgate.pipeline.kafka_write import write_exactly_once
from commitgate.pipeline.options import parse_write
from tests.pipeline.test_source import create_topic, produce
from tests.waiting import wait_until

DEADLINE_S = 300.0


def topic_records(bootstrap: str, topic: str) -> list:
    """Every record of `topic`, read as a consumer would."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        records: list = []
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"reading {topic} made no progress"
            for batch in consumer.poll(timeout_ms=500).values():
                records += batch
        return records
    finally:
        consumer.close()


def end_total(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def rows(first: int, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "key": [f"k{i}" for i in range(first, first + count)],
        "value": [f"v{i % 700}" for i in range(first, first + count)]})  # repeated contents too


def test_a_task_retried_after_a_partial_write_writes_the_rest_once(broker):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "eo-task", 3)
    options = parse_write({"kafka.bootstrap.servers": bootstrap, "topic": "eo-task"},
                          streaming=True)
    task = TaskIdentity("query-eo-task", 7, 0)
    batches = [rows(0, 1000), rows(1000, 1000), rows(2000, 1000)]

    def dying() -> Iterator[pa.RecordBatch]:
        """The first two batches, then the executor is lost once some records landed."""
        yield from batches[:2]
        wait_until(lambda: end_total(bootstrap, "eo-task") >= 500, "the first records",
                   deadline_s=DEADLINE_S)
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        write_exactly_once(options, dying(), task)
    landed = end_total(bootstrap, "eo-task")
    assert 500 <= landed <= 2000
    retried = write_exactly_once(options, iter(batches), task)
    assert (retried.skipped, retried.records) == (landed, 3000 - landed)
    expected = Counter((f"k{i}".encode(), f"v{i % 700}".encode()) for i in range(3000))
    written = topic_records(bootstrap, "eo-task")
    assert Counter((r.key, r.value) for r in written) == expected
    assert all([k for k, _ in r.headers] == [ATTEMPT_HEADER] for r in written)
    again = write_exactly_once(options, iter(batches), task)  # the batch replayed once more
    assert (again.records, again.skipped) == (0, 3000)
    assert end_total(bootstrap, "eo-task") == 3000
    # the next micro-batch deletes the markers of batch 7 it no longer needs
    write_exactly_once(options, iter([rows(3000, 10)]), TaskIdentity("query-eo-task", 8, 0))
    markers = TopicPartition(MARKER_TOPIC_PREFIX + "query-eo-task", 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        assert consumer.beginning_offsets([markers])[markers] > 0
    finally:
        consumer.close()


def session_pids(sid: int) -> list[int]:
    """Processes of a session (the driver, its JVM and Python workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[3]) == sid:
            pids.append(int(entry.name))
    return pids


def kill_session(driver: subprocess.Popen) -> None:
    for pid in session_pids(driver.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    driver.wait(timeout=60)
    wait_until(lambda: not session_pids(driver.pid), "the killed driver's processes to go",
               deadline_s=DEADLINE_S)


def start_job(bootstrap: str, checkpoint: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.pipeline.stream_job", "--bootstrap", bootstrap,
               "--input", "eo-in", "--output", "eo-out", "--checkpoint", str(checkpoint)]
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def test_a_driver_killed_mid_stream_restarts_without_duplicates(broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "eo-in", 3)
    create_topic(bootstrap, "eo-out", 2)
    produce(bootstrap, "eo-in", 0, 6000, 3)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    driver = start_job(bootstrap, checkpoint, log)
    try:
        wait_until(lambda: end_total(bootstrap, "eo-out") >= 600 or driver.poll() is not None,
                   "the first micro-batches", deadline_s=DEADLINE_S)
        assert driver.poll() is None, log.read_text()[-3000:]
    finally:
        kill_session(driver)
    assert end_total(bootstrap, "eo-out") < 6000  # killed in the middle of the stream
    driver = start_job(bootstrap, checkpoint, log)
    try:
        assert driver.wait(timeout=DEADLINE_S) == 0, log.read_text()[-3000:]
    finally:
        kill_session(driver)
    values = Counter(r.value for r in topic_records(bootstrap, "eo-out"))
    assert values == Counter(b"v%d!" % i for i in range(6000))
