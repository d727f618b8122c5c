"""``commitgate topic`` against a real broker: create then describe (offsets, sizes, config
sources), list, alter-config, add-partitions, delete, and the broker's refusals as messages."""
from __future__ import annotations

import json

from kafka import KafkaProducer
from typer.testing import CliRunner

from commitgate.cli.app import app

RUNNER = CliRunner(env={"COLUMNS": "200"})


def _run(broker, *args: str, code: int = 0):
    result = RUNNER.invoke(app, [*args, "--bootstrap", broker.bootstrap])
    assert result.exit_code == code, result.output
    return result


def _rows(output: str, first: str) -> list[list[str]]:
    return [line.replace("│", " ").split() for line in output.splitlines()
            if line.startswith(f"│ {first} ")]


def test_create_then_describe_round_trip(broker):
    created = _run(broker, "topic", "create", "orders", "-p", "3", "-c", "retention.ms=600000",
                   "-c", "cleanup.policy=compact")
    assert "created topic orders with 3 partitions" in created.output
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(5):
        producer.send("orders", b"v" * 100, key=b"k%d" % i, partition=1)
    producer.flush()
    producer.close()

    described = json.loads(_run(broker, "topic", "describe", "orders", "--json").stdout)
    parts = described["partitions"]
    assert [(p["partition"], p["log_start_offset"], p["log_end_offset"]) for p in parts] == \
        [(0, 0, 0), (1, 0, 5), (2, 0, 0)]
    assert parts[0]["size_bytes"] == 0 and parts[1]["size_bytes"] > 500
    configs = {c["name"]: (c["value"], c["source"]) for c in described["configs"]}
    assert configs["retention.ms"] == ("600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert configs["segment.bytes"][1] == "DEFAULT_CONFIG"

    table = _run(broker, "topic", "describe", "orders").output
    assert "3 partitions" in table
    assert _rows(table, "1")[0][3:5] == ["0", "5"]  # log start, log end
    assert ["retention.ms", "600000", "DYNAMIC_TOPIC_CONFIG"] in _rows(table, "retention.ms")

    listed = json.loads(_run(broker, "topic", "list", "--json").stdout)
    assert {"name": "orders", "partitions": 3, "internal": False} in listed
    assert ["orders", "3"] in _rows(_run(broker, "topic", "list").output, "orders")


def test_alter_config_add_partitions_and_delete(broker):
    _run(broker, "topic", "create", "altered", "-c", "retention.ms=1000")
    _run(broker, "topic", "alter-config", "altered", "--set", "segment.ms=7200000", "--delete",
         "retention.ms")
    configs = {c["name"]: c for c in json.loads(
        _run(broker, "topic", "describe", "altered", "--json").stdout)["configs"]}
    assert (configs["segment.ms"]["value"], configs["segment.ms"]["source"]) == \
        ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    assert "altered now has 3 partitions" in \
        _run(broker, "topic", "add-partitions", "altered", "-n", "2").output
    described = json.loads(_run(broker, "topic", "describe", "altered", "--json").stdout)
    assert len(described["partitions"]) == 3

    _run(broker, "topic", "delete", "altered")
    assert "altered" not in [t["name"] for t in json.loads(
        _run(broker, "topic", "list", "--json").stdout)]


def test_refusals_are_messages_with_exit_code_1(broker):
    _run(broker, "topic", "create", "twice")
    again = _run(broker, "topic", "create", "twice", code=1)
    assert "twice: Topic 'twice' already exists. (TopicAlreadyExistsError)" in again.output
    assert "UnknownTopicOrPartitionError" in _run(broker, "topic", "describe", "absent",
                                                  code=1).output
    assert "UnknownTopicOrPartitionError" in _run(broker, "topic", "delete", "absent",
                                                  code=1).output
    unknown = _run(broker, "topic", "alter-config", "twice", "--set", "no.such=1", code=1)
    assert "no.such" in unknown.output
    assert "Traceback" not in again.output + unknown.output
