"""What every real client must manage against CommitGate, judged from the client's own report.

Each client test module (aiokafka, confluent-kafka, kafkajs, the Java client) runs the same
scenarios through its client, in process or in one driver process, and provides two
module-scoped fixtures: ``reports`` (scenario name -> the JSON-shaped dict the client reported:
what it sent, with the partition and offset the broker gave, and what it read back) and
``traits`` (the client's own conventions: its partitioner, whether it is idempotent by default).
The tests below are imported by those modules (``from tests.gateway.client_contract import *``),
so pytest runs them once per client. Stored batches are read back over the raw wire, to see what
the client really sent (codec, producer id, sequences), not what it says it sent.

Scenarios (topics are created with the client's admin API, ``<prefix>-<scenario>``):
- ``codec-<c>`` for none/gzip/snappy/lz4/zstd: 50 keyed records with headers, one partition,
  read from offset 0 and again from offset 25 (``from_middle``: inside a batch).
- ``keys``: 40 keyed records on 4 partitions, placed by the client's default partitioner.
- ``nulls``: null key, null value, both null, empty value with headers.
- ``large``: one 5 MiB record on a topic created with max.message.bytes=8 MiB.
- ``too-large``: the same record on a default topic (1 MiB): refused with MESSAGE_TOO_LARGE.
- ``offsets``: 5 records with timestamps 1,000,000 + i*1000, a ``latest`` consumer, 3 more
  records; earliest / latest consumption, offsets for times, beginning and end offsets.
- ``acks``: 10 records each with acks 0, 1 and all.
- ``idempotent``: 100 records from an idempotent producer (the client's default or asked for).
- ``auto-create``: 3 records to ``<prefix>-auto-created``, a topic nobody created.
- ``log-append-time``: 5 records with timestamps BASE_TS + i, gzip, on a topic with
  message.timestamp.type=LogAppendTime; the timestamps read back (and whether the client
  calls them LogAppendTime; None where it does not say).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2

from protocol import messages
from protocol.record_batch import CODECS, BatchHeader, iter_batch_headers
from compat_tests.wire import WireClient

__all__ = [  # what ``import *`` gives the client modules: the tests
    "test_acks_zero_one_and_all",
    "test_auto_created_topic",
    "test_codec_round_trip",
    "test_earliest_latest_and_offsets_for_times",
    "test_idempotent_producer",
    "test_keys_land_on_the_partitioners_partition",
    "test_large_record_on_a_topic_that_allows_it",
    "test_log_append_time_topic",
    "test_null_keys_values_and_headers",
    "test_too_large_record_is_refused",
]

ALLOW_MISSING = "COMMITGATE_ALLOW_MISSING_CLIENTS"
CODEC_NAMES = list(CODECS)
LARGE_BYTES = 5 * 1024 * 1024
LARGE_TOPIC_MAX = 8 * 1024 * 1024
BASE_TS = 1_000_000
MIDDLE = 25  # an offset inside the codec scenario's batch
LOG_APPEND_TIME_FLAG = 0x08  # RecordBatch attributes: timestamp type
# (query timestamp, expected offset, expected timestamp) for the ``offsets`` scenario;
# None: no record at or after the query
TIME_QUERIES = [(0, 0, BASE_TS), (BASE_TS + 4500, 5, BASE_TS + 5000),
                (BASE_TS + 7000, 7, BASE_TS + 7000), (BASE_TS + 99_000, None, None)]
FETCH_KEY, FETCH_VERSION = 1, 12
API_VERSIONS_KEY = 18
FIND_COORDINATOR_KEY = 10
Fetch = messages.get("FetchRequest").cls
ApiVersions = messages.get("ApiVersionsRequest").cls


# ---- what the Python drivers (aiokafka, confluent-kafka) send: as the Java and Node drivers ----

Headers = list[tuple[str, bytes | None]]
CODEC_RECORDS: list[tuple[bytes, bytes, Headers]] = [
    (b"key-%d" % i, bytes([i % 251]) * (i * 37 % 2000), [("h", b"%d" % i), ("i", b"x")])
    for i in range(50)]
KEYED_RECORDS = [(b"k-%d" % i, b"v-%d" % i) for i in range(40)]
KEYS_PARTITIONS = 4
NULL_RECORDS: list[tuple[bytes | None, bytes | None, Headers]] = [
    (None, b"v", []), (b"k", None, []), (None, None, []), (b"k2", b"", [("empty", b"")])]
LARGE_VALUE = bytes(range(256)) * (LARGE_BYTES // 256)
IDEMPOTENT_RECORDS = [(b"id-%d" % i, b"value-%d" % i) for i in range(100)]


def describe(partition: int, offset: int, key: bytes | None, value: bytes | None,
             headers: Headers | None) -> dict:
    """One record as the drivers report it (bytes as hex)."""
    return {"partition": partition, "offset": offset, "key": _hex(key), "value": _hex(value),
            "headers": [[k, _hex(v)] for k, v in headers or []]}


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def large_report(topic: str, offset: int, received: bytes) -> dict:
    return {"topic": topic, "offset": offset,
            "sent_sha256": hashlib.sha256(LARGE_VALUE).hexdigest(), "sent_size": len(LARGE_VALUE),
            "received_sha256": hashlib.sha256(received).hexdigest(),
            "received_size": len(received)}


@dataclass(frozen=True)
class ClientTraits:
    partition_of: Callable[[bytes, int], int]  # the default partitioner for a keyed record
    idempotent_by_default: bool
    too_large_error: str  # how the client names MESSAGE_TOO_LARGE
    missing_time_is_end: bool = False  # kafkajs answers "no record after T" with the end offset
    reports_timestamps: bool = True  # whether its offsets-for-times returns the record timestamp
    sends_null_record: bool = True  # aiokafka refuses a record whose key and value are both null
    uncompressed_codecs: frozenset[str] = frozenset()  # codecs the client quietly does not use
    # librdkafka sends a batch uncompressed when compression would not make it smaller
    compresses_only_when_smaller: bool = False


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (Java client, kafkajs 2, aiokafka, kafka-python)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def librdkafka_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default ``consistent_random``: CRC-32 of the key."""
    return zlib.crc32(key) % partitions


def require_runtime(name: str) -> str:
    """The path of a client runtime (java, javac, node, npm). CI must run every client, so a
    missing one fails the test unless COMMITGATE_ALLOW_MISSING_CLIENTS=1 allows a skip."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH")
    return path


def missing(reason: str) -> None:
    if os.environ.get(ALLOW_MISSING) == "1":
        pytest.skip(f"{reason} ({ALLOW_MISSING}=1)")
    pytest.fail(f"{reason}: every client must run in CI (set {ALLOW_MISSING}=1 to skip locally)")


def run_scenarios(bodies: dict[str, Callable[[], dict]]) -> dict:
    """Run in-process scenarios; a failing one is reported with its traceback, as the
    drivers do, so that only its own test fails."""
    reports = {}
    for name, body in bodies.items():
        try:
            reports[name] = {"scenario": name, **body()}
        except Exception:  # noqa: BLE001 - reported to the scenario's test
            reports[name] = {"scenario": name, "error": traceback.format_exc()}
    return reports


def run_tool(command: list[str], timeout_s: float, cwd: Path | None = None) -> str:
    """Run javac, npm or a driver; its stdout, or a failure showing its stderr."""
    run = subprocess.run(command, check=False, capture_output=True, text=True, cwd=cwd,
                         timeout=timeout_s)
    assert run.returncode == 0, \
        f"{Path(command[0]).name} exited {run.returncode}:\n{run.stderr[-4000:]}"
    return run.stdout


def run_driver(command: list[str], timeout_s: float) -> dict:
    """Run a driver process; its JSON lines by scenario name."""
    lines = [json.loads(line) for line in run_tool(command, timeout_s).splitlines()
             if line.startswith("{")]
    return {line["scenario"]: line for line in lines}


def advertised_apis(bootstrap: str) -> set[int]:
    """The API keys the broker lists in ApiVersions (v0)."""
    with WireClient(bootstrap) as client:
        return {api.api_key for api in client.request(API_VERSIONS_KEY, 0, ApiVersions()).api_keys}


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list[BatchHeader]:
    """Headers of every batch stored in a partition, read over the raw wire."""
    headers: list[BatchHeader] = []
    offset = 0
    with WireClient(bootstrap) as client:
        for _ in range(10_000):
            request = Fetch(max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
                            session_epoch=-1, topics=[Fetch.FetchTopic(topic=topic, partitions=[
                                Fetch.FetchPartition(partition=partition, fetch_offset=offset,
                                                     partition_max_bytes=64 << 20)])])
            part = client.request(FETCH_KEY, FETCH_VERSION, request).responses[0].partitions[0]
            assert part.error_code == 0, f"raw fetch of {topic}-{partition}: {part.error_code}"
            found = list(iter_batch_headers(bytes(part.records or b"")))
            if not found:
                return headers
            headers += found
            offset = found[-1].base_offset + found[-1].offset_count
    raise AssertionError(f"{topic}-{partition} never ended")


def _report(reports: dict, scenario: str) -> dict:
    report = reports.get(scenario)
    assert report is not None, f"the client reported nothing for {scenario}"
    assert "error" not in report, f"{scenario} failed in the client:\n{report['error']}"
    return report


def _key(record: dict) -> tuple:
    return record["partition"], record["offset"]


def _assert_round_trip(report: dict) -> None:
    """Everything sent came back, unchanged, at the offset the broker acknowledged."""
    sent, received = report["sent"], report["received"]
    assert len(received) == len(sent)
    assert sorted(received, key=_key) == sorted(sent, key=_key)
    by_partition: dict[int, list[int]] = {}
    for record in received:
        by_partition.setdefault(record["partition"], []).append(record["offset"])
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))


# ---- the tests each client module imports ---------------------------------------------------


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_codec_round_trip(broker, reports, traits, codec):
    report = _report(reports, f"codec-{codec}")
    _assert_round_trip(report)
    assert [r["value"] for r in report["received"]] == [_hex(v) for _, v, _ in CODEC_RECORDS]
    assert report["received"][7]["headers"] == [["h", b"7".hex()], ["i", b"x".hex()]]
    assert report["from_middle"] == list(range(MIDDLE, len(CODEC_RECORDS)))
    batches = stored_batches(broker.bootstrap, report["topic"])
    sent_as = CODECS["none" if codec in traits.uncompressed_codecs else codec]
    if traits.compresses_only_when_smaller:  # e.g. a lone small record sent before the rest
        assert {b.codec for b in batches} <= {sent_as, CODECS["none"]}
        assert max(batches, key=lambda b: b.record_count).codec == sent_as
    else:
        assert {b.codec for b in batches} == {sent_as}, "stored as sent, in the client's codec"
    assert all((b.producer_id >= 0) == traits.idempotent_by_default for b in batches)


def test_keys_land_on_the_partitioners_partition(reports, traits):
    report = _report(reports, "keys")
    _assert_round_trip(report)
    partitions = report["partitions"]
    for record in report["sent"]:
        key = bytes.fromhex(record["key"])
        assert record["partition"] == traits.partition_of(key, partitions), key
    assert len({r["partition"] for r in report["received"]}) == partitions


def test_null_keys_values_and_headers(reports, traits):
    report = _report(reports, "nulls")
    _assert_round_trip(report)
    pairs = [(r["key"], r["value"]) for r in sorted(report["received"], key=_key)]
    expected = [(_hex(k), _hex(v)) for k, v, _ in NULL_RECORDS
                if traits.sends_null_record or (k, v) != (None, None)]
    assert pairs == expected
    assert report["received"][-1]["headers"][0] == ["empty", ""]


def test_large_record_on_a_topic_that_allows_it(broker, reports):
    report = _report(reports, "large")
    assert report["sent_size"] == report["received_size"] == LARGE_BYTES
    assert report["received_sha256"] == report["sent_sha256"]
    [batch] = stored_batches(broker.bootstrap, report["topic"])
    assert batch.size > LARGE_BYTES


def test_too_large_record_is_refused(broker, reports, traits):
    report = _report(reports, "too-large")
    assert report["refused"] == traits.too_large_error
    assert stored_batches(broker.bootstrap, report["topic"]) == []


def test_earliest_latest_and_offsets_for_times(reports, traits):
    report = _report(reports, "offsets")
    assert report["latest_position"] == 5
    assert report["latest_received"] == [5, 6, 7]
    assert report["earliest_received"] == list(range(8))
    assert (report["beginning"], report["end"]) == (0, 8)
    for found, (query, offset, timestamp) in zip(report["by_time"], TIME_QUERIES, strict=True):
        assert found["query"] == query
        if offset is None and traits.missing_time_is_end:
            offset = 8
        assert found["offset"] == offset, found
        if traits.reports_timestamps:
            assert found["timestamp"] == timestamp, found


def test_acks_zero_one_and_all(reports):
    report = _report(reports, "acks")
    received = sorted(report["received"], key=_key)
    assert [r["offset"] for r in received] == list(range(30))
    assert [r["value"] for r in received] == [r["value"] for r in report["sent"]]
    assert all(r["offset"] >= 0 for r in report["sent"][10:]), "acks 1 and all get offsets"


def test_idempotent_producer(broker, reports):
    report = _report(reports, "idempotent")
    _assert_round_trip(report)
    batches = stored_batches(broker.bootstrap, report["topic"])
    assert len(batches) > 1
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    assert {b.producer_epoch for b in batches} == {0}
    sequence = 0
    for batch in batches:
        assert batch.base_sequence == sequence
        sequence += batch.record_count


def test_auto_created_topic(reports):
    report = _report(reports, "auto-create")
    _assert_round_trip(report)
    assert len(report["received"]) == 3


def test_log_append_time_topic(broker, reports):
    report = _report(reports, "log-append-time")
    timestamps = report["timestamps"]
    assert len(timestamps) == 5 and len(set(timestamps)) == 1, "one append time per batch"
    assert timestamps[0] > BASE_TS + 5, "the broker's clock, not the producer's timestamps"
    assert all(flag in (True, None) for flag in report["log_append_time"])
    batches = stored_batches(broker.bootstrap, report["topic"])
    assert all(b.attributes & LOG_APPEND_TIME_FLAG for b in batches)
    assert batches[-1].max_timestamp == timestamps[0]
