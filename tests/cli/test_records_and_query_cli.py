"""``commitgate produce``, ``consume`` and ``query`` against a real broker: 10,000 keyed
records over 8 partitions in from stdin and back out as JSON, then every key found through the
IndexFiles on the admin API at the offsets the consumer saw, time ranges, and what is not
there."""
from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from typer.testing import CliRunner

from commitgate.cli.app import app
from commitgate.cli.query import fetch

RUNNER = CliRunner(env={"COLUMNS": "200"})
TOPIC = "keyed"
RECORDS = 10_000
PARTITIONS = 8
CLOCK_DEADLINE_S = 5.0


def _run(broker, *args: str, stdin: str | None = None, code: int = 0, admin: bool = False):
    where = ["--admin", broker.admin_url] if admin else ["--bootstrap", broker.bootstrap]
    result = RUNNER.invoke(app, [*args, *where], input=stdin)
    assert result.exit_code == code, result.output
    return result


def _lines(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def produced(broker) -> dict[str, tuple[int, int]]:
    """key -> (partition, offset) of 10,000 records produced from stdin, as consumed back."""
    _run(broker, "topic", "create", TOPIC, "-p", str(PARTITIONS))
    lines = "".join(f"key-{i}:value-{i}\n" for i in range(RECORDS))
    result = _run(broker, "produce", TOPIC, "-K", ":", "--compression", "lz4", stdin=lines)
    assert f"produced {RECORDS} records to {TOPIC}" in result.output
    consumed = _lines(_run(broker, "consume", TOPIC, "--from-beginning", "-n", str(RECORDS),
                           "--format", "json"))
    assert len(consumed) == RECORDS
    assert sorted(r["value"] for r in consumed) == sorted(f"value-{i}" for i in range(RECORDS))
    assert all(r["value"] == "value-" + r["key"].removeprefix("key-") for r in consumed)
    per_partition: dict[int, list[int]] = {}
    for r in consumed:
        per_partition.setdefault(r["partition"], []).append(r["offset"])
    assert sorted(per_partition) == list(range(PARTITIONS))  # the keys spread over all 8
    assert all(o == list(range(len(o))) for o in per_partition.values())  # in order, no gaps
    return {r["key"]: (r["partition"], r["offset"]) for r in consumed}


def test_query_finds_every_key_at_its_offset(broker, produced):
    """Every key through the command's request to the admin API (a whole command in-process
    costs ~100 ms of typer set-up), and every 50th through the whole command."""
    for n, (key, (partition, offset)) in enumerate(sorted(produced.items())):
        found = fetch(broker.admin_url, {"topic": TOPIC, "key": key}) if n % 50 else \
            json.loads(_run(broker, "query", TOPIC, "--key", key, "--json", admin=True).stdout)
        assert [(r["partition"], r["offset"], r["key"]) for r in found["records"]] == \
            [(partition, offset, key)], key
        # one CommitLog entry read per IndexFile hit (a batch holds ~100s of these records)
        assert found["entries_read"] == found["index_hits"] == 1, key
    table = _run(broker, "query", TOPIC, "--key", "key-42", admin=True).output
    partition, offset = produced["key-42"]
    assert [[str(partition), str(offset)]] == [row[:2] for row in (
        line.replace("│", " ").split() for line in table.splitlines()) if "value-42" in row]


def test_a_key_never_produced_returns_nothing(broker, produced):
    found = json.loads(_run(broker, "query", TOPIC, "--key", "key-10000", "--json",
                            admin=True).stdout)
    assert found["records"] == [] and found["entries_read"] == 0
    assert "0 records" in _run(broker, "query", TOPIC, "--key", "nope", admin=True).output


def _now_ms() -> int:
    return int(time.time() * 1000)


def _clock_past(mark: int) -> None:
    deadline = time.monotonic() + CLOCK_DEADLINE_S
    while _now_ms() <= mark:
        assert time.monotonic() < deadline, "the clock did not move"


def test_query_honours_time_ranges(broker, produced):
    _run(broker, "produce", TOPIC, "--key", "timed", "--value", "first")
    mark = _now_ms()  # the first was stored at or before, the second will be after
    _clock_past(mark)
    _run(broker, "produce", TOPIC, "--key", "timed", "--value", "second")

    def values(*bounds: str) -> list[str]:
        found = _run(broker, "query", TOPIC, "--key", "timed", *bounds, "--json", admin=True)
        return [r["value"] for r in json.loads(found.stdout)["records"]]

    assert values() == ["second", "first"]  # newest first
    assert values("--since", str(mark + 1)) == ["second"]
    assert values("--until", str(mark)) == ["first"]
    assert values("--since", "-1h", "--until", str(mark)) == ["first"]
    assert values("--since", str(_now_ms() + 60_000)) == []
    assert values("--max", "1") == ["second"]


def test_query_by_offset_and_time(broker, produced):
    partition, offset = produced["key-7"]
    found = json.loads(_run(broker, "query", TOPIC, "--partition", str(partition), "--offset",
                            str(offset), "--json", admin=True).stdout)
    assert [(r["key"], r["value"]) for r in found["records"]] == [("key-7", "value-7")]
    first = json.loads(_run(broker, "query", TOPIC, "--partition", str(partition), "--time",
                            "0", "--json", admin=True).stdout)
    assert [r["offset"] for r in first["records"]] == [0]
    later = _run(broker, "query", TOPIC, "--partition", "0", "--time", str(_now_ms() + 60_000),
                 "--json", admin=True)
    assert json.loads(later.stdout)["records"] == []


def test_query_errors(broker, produced):
    assert "unknown topic absent" in _run(broker, "query", "absent", "--key", "k", code=1,
                                          admin=True).output
    assert "no record at offset 999999" in _run(
        broker, "query", TOPIC, "--partition", "0", "--offset", "999999", code=1,
        admin=True).output
    assert "either offset or time" in _run(broker, "query", TOPIC, "--partition", "0",
                                           code=1, admin=True).output
    assert "is not a time" in _run(broker, "query", TOPIC, "--key", "k", "--since", "soon",
                                   code=2, admin=True).output
    refused = RUNNER.invoke(app, ["query", TOPIC, "--key", "k", "--admin",
                                  "http://127.0.0.1:1"])
    assert refused.exit_code == 1 and "no admin API at http://127.0.0.1:1" in refused.output


def test_produce_options_and_consume_starts(broker):
    _run(broker, "topic", "create", "opts", "-p", "2")
    for i in range(4):
        _run(broker, "produce", "opts", "--value", f"v{i}", "--key", "k", "-H", "a=1",
             "-H", "b=two", "-p", "1", "--compression", "gzip")
    records = _lines(_run(broker, "consume", "opts", "--from-beginning", "-e", "--format",
                          "json"))
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in records] == \
        [(1, i, "k", f"v{i}") for i in range(4)]
    assert records[0]["headers"] == [["a", "1"], ["b", "two"]]
    from_offset = _run(broker, "consume", "opts", "-p", "1", "--offset", "2", "-e")
    assert from_offset.stdout.splitlines() == ["v2", "v3"]
    assert _run(broker, "consume", "opts", "-p", "0", "--from-beginning", "-e").stdout == ""
    assert _run(broker, "consume", "opts", "--time", str(_now_ms() + 60_000), "-e").stdout == ""
    assert _run(broker, "consume", "opts", "--time", "-1h", "-n", "4").stdout.splitlines() == \
        [f"v{i}" for i in range(4)]
    assert "has no partition 5" in _run(broker, "consume", "opts", "-p", "5", code=1).output
    assert "unknown topic nothere" in _run(broker, "consume", "nothere", "-e", code=1).output


def test_consume_as_a_group_commits_its_offsets(broker):
    _run(broker, "topic", "create", "grouped")
    for i in range(3):
        _run(broker, "produce", "grouped", "--value", f"g{i}")
    first = _run(broker, "consume", "grouped", "--group", "readers", "--from-beginning", "-n",
                 "3")
    assert first.stdout.splitlines() == ["g0", "g1", "g2"]
    committed = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="readers")
    try:
        assert committed.committed(TopicPartition("grouped", 0)) == 3
    finally:
        committed.close()
