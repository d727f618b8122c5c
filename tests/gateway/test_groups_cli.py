"""``commitgate groups`` against a real broker: the list, and a group's lag per partition, for
classic and KIP-848 (consumer protocol) groups."""
from __future__ import annotations

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from typer.testing import CliRunner

from compat_tests.wire import WireClient
from cli.app import app
from protocol import messages


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


def test_a_consumer_protocol_group_shows_its_epochs_members_and_lag(broker):
    """A KIP-848 member (raw ConsumerGroupHeartbeat) holds both partitions and commits at its
    member epoch: the list shows the group's type, describe its epochs, member and lag."""
    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("kip848-lag", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send("kip848-lag", b"x", partition=i % 2)
    producer.flush()
    producer.close()
    hb, commit = (messages.get(n).cls for n in ("ConsumerGroupHeartbeatRequest",
                                                "OffsetCommitRequest"))
    with WireClient(bootstrap) as client:
        joined = client.request(68, 0, hb(
            group_id="modern", member_id="", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=["kip848-lag"], topic_partitions=[]))
        committed = client.request(8, 9, commit(
            group_id="modern", generation_id_or_member_epoch=1, member_id=joined.member_id,
            topics=[commit.OffsetCommitRequestTopic(name="kip848-lag", partitions=[
                commit.OffsetCommitRequestPartition(partition_index=1, committed_offset=1)])]))
    assert joined.error_code == 0 and committed.topics[0].partitions[0].error_code == 0
    runner = CliRunner(env={"COLUMNS": "250"})
    listed = runner.invoke(app, ["groups", "list", "--bootstrap", bootstrap])
    assert listed.exit_code == 0, listed.output
    assert [line.replace("│", " ").split() for line in listed.output.splitlines()
            if "modern" in line] == [["modern", "Stable", "consumer", "consumer"]]
    described = runner.invoke(app, ["groups", "describe", "modern", "--bootstrap", bootstrap])
    assert described.exit_code == 0, described.output
    assert "(consumer): Stable, group epoch 1, assignment epoch 1, assignor uniform, 1 members" \
        in described.output
    [member] = [line.replace("│", " ").split() for line in described.output.splitlines()
                if line.startswith(f"│ {joined.member_id}") and "kip848-lag-0" in line]
    assert member[-3:] == ["1", "kip848-lag-0,", "kip848-lag-1"]
    rows = [line.replace("│", " ").split() for line in described.output.splitlines()
            if line.startswith("│ kip848-lag")]
    assert rows == [["kip848-lag", "0", "-", "3", "3", joined.member_id],
                    ["kip848-lag", "1", "1", "2", "1", joined.member_id]]
