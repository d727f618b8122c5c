"""``commitgate groups`` against a real broker: the list, and a group's lag per partition."""
from __future__ import annotations

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from typer.testing import CliRunner

from gateway.cli import app


def test_groups_list_and_describe_show_lag(broker):
    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("lagged", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(7):
        producer.send("lagged", b"x", partition=i % 2)
    producer.flush()
    producer.close()
    admin.alter_group_offsets("reporting", {TopicPartition("lagged", 0): OffsetAndMetadata(
        1, "", -1)})  # a simple commit: generation -1, no member
    admin.close()
    runner = CliRunner(env={"COLUMNS": "200"})
    listed = runner.invoke(app, ["groups", "list", "--bootstrap", bootstrap])
    assert listed.exit_code == 0 and "reporting" in listed.output and "Empty" in listed.output
    described = runner.invoke(app, ["groups", "describe", "reporting", "--bootstrap", bootstrap])
    assert described.exit_code == 0, described.output
    rows = [line.replace("│", " ").split() for line in described.output.splitlines()
            if line.startswith("│ lagged")]
    assert rows == [["lagged", "0", "1", "4", "3", "-"]]
