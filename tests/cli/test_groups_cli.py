"""``commitgate group`` against a real broker: the list, and a group's lag per partition, for
classic and KIP-848 (consumer protocol) groups; reset-offsets (a dry run, then applied, seen
by a restarted consumer) and delete; ``groups`` stays as a hidden alias."""
from __future__ import annotations

import json
import time
import urllib.request

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from typer.testing import CliRunner

from commitgate.cli.app import app
from commitgate.compat_tests.wire import WireClient
from commitgate.protocol import messages


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
    described = runner.invoke(app, ["group", "describe", "reporting", "--bootstrap", bootstrap])
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
    listed = runner.invoke(app, ["group", "list", "--bootstrap", bootstrap])
    assert listed.exit_code == 0, listed.output
    assert [line.replace("│", " ").split() for line in listed.output.splitlines()
            if "modern" in line] == [["modern", "Stable", "consumer", "consumer"]]
    described = runner.invoke(app, ["group", "describe", "modern", "--bootstrap", bootstrap])
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
    [listed] = [g for g in _admin_groups(broker) if g["group"] == "modern"]
    assert (listed["type"], listed["state"]) == ("consumer", "Stable")
    assert [(m["member_id"], m["epoch"], m["assigned"]) for m in listed["members"]] == \
        [(joined.member_id, 1, ["kip848-lag-0", "kip848-lag-1"])]
    assert [(r["partition"], r["committed"], r["lag"]) for r in listed["lag"]] == [(1, 1, 1)]


DEADLINE_S = 30.0


def _admin_groups(broker) -> list[dict]:
    """/v1/groups of the broker's admin API."""
    with urllib.request.urlopen(f"{broker.admin_url}/v1/groups", timeout=30) as response:
        return json.load(response)["groups"]


def _consume(bootstrap: str, group: str, want: int, *, keep_open: bool = False):
    """(partition, offset) of ``want`` records read as ``group`` from its committed offsets
    (from the beginning without), committed; the consumer is closed unless ``keep_open``."""
    consumer = KafkaConsumer("replayed", bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen += [(r.partition, r.offset) for r in records]
    consumer.commit()
    if keep_open:
        return sorted(seen), consumer
    consumer.close()
    return sorted(seen), None


def _committed(runner: CliRunner, bootstrap: str, group: str) -> dict[int, int]:
    described = runner.invoke(app, ["group", "describe", group, "--json", "--bootstrap",
                                    bootstrap])
    assert described.exit_code == 0, described.output
    return {row["partition"]: row["committed"] for row in json.loads(described.stdout)["lag"]}


def test_reset_offsets_changes_what_a_restarted_consumer_reads(broker):
    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("replayed", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send("replayed", b"r%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    runner = CliRunner(env={"COLUMNS": "200"})

    def reset(*args: str, code: int = 0):
        result = runner.invoke(app, ["group", "reset-offsets", "replayers", *args,
                                     "--bootstrap", bootstrap])
        assert result.exit_code == code, result.output
        return result

    seen, consumer = _consume(bootstrap, "replayers", 10, keep_open=True)
    assert len(seen) == 10
    try:  # a member could commit over the reset: refused as Kafka's tool refuses it
        busy = reset("--all-topics", "--to-earliest", code=1)
        assert "can only be reset if the group 'replayers' is inactive, but the current " \
               "state is Stable" in busy.output
    finally:
        consumer.close()

    dry = reset("--all-topics", "--to-offset", "3")
    assert "dry run: nothing changed" in dry.output
    assert [line.replace("│", " ").split() for line in dry.output.splitlines()
            if line.startswith("│ replayed")] == [["replayed", "0", "5", "3"],
                                                  ["replayed", "1", "5", "3"]]
    assert _committed(runner, bootstrap, "replayers") == {0: 5, 1: 5}

    applied = reset("--topic", "replayed", "--to-offset", "3", "--execute")
    assert "offsets of group replayers reset" in applied.output
    assert _committed(runner, bootstrap, "replayers") == {0: 3, 1: 3}
    assert _consume(bootstrap, "replayers", 4)[0] == [(0, 3), (0, 4), (1, 3), (1, 4)]

    reset("--topic", "replayed:0", "--to-earliest", "--execute")
    assert _committed(runner, bootstrap, "replayers") == {0: 0, 1: 5}
    assert _consume(bootstrap, "replayers", 5)[0] == [(0, o) for o in range(5)]

    clamped = json.loads(reset("--topic", "replayed:1", "--to-offset", "99", "--json").stdout)
    assert clamped["partitions"] == [{"topic": "replayed", "partition": 1, "current": 5,
                                      "new": 5}] and not clamped["executed"]
    reset("--all-topics", "--to-datetime", "-1h", "--execute")
    assert _committed(runner, bootstrap, "replayers") == {0: 0, 1: 0}
    future = str(int(time.time() * 1000) + 3_600_000)
    reset("--all-topics", "--to-datetime", future, "--execute")  # no record after: the end
    assert _committed(runner, bootstrap, "replayers") == {0: 5, 1: 5}
    [listed] = [g for g in _admin_groups(broker) if g["group"] == "replayers"]
    assert (listed["type"], listed["state"], listed["members"]) == ("classic", "Empty", [])
    assert [(r["topic"], r["partition"], r["committed"], r["log_end_offset"], r["lag"])
            for r in listed["lag"]] == [("replayed", 0, 5, 5, 0), ("replayed", 1, 5, 5, 0)]
    reset("--all-topics", code=2)  # no target
    reset("--to-latest", code=2)  # no partitions


def test_delete_groups(broker):
    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("doomed", 1, 1)])
    admin.alter_group_offsets("doomed-group", {TopicPartition("doomed", 0): OffsetAndMetadata(
        0, "", -1)})
    admin.close()
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(app, ["group", "delete", "doomed-group", "never-was", "--bootstrap",
                                 bootstrap])
    assert result.exit_code == 1
    assert "deleted group doomed-group" in result.output
    assert "group never-was not deleted: GroupIdNotFoundError" in result.output
    listed = runner.invoke(app, ["group", "list", "--json", "--bootstrap", bootstrap])
    assert "doomed-group" not in [g["group"] for g in json.loads(listed.stdout)]
