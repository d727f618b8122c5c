"""KIP-848 at Kafka 4's level: ConsumerGroupHeartbeat v1 (member ids the client makes, KIP-1082;
SubscribedTopicRegex, resolved against the topics and again as topics come and go, kept in the
member's record across a restart) and ConsumerGroupDescribe v1 (MemberType), over the raw wire
with Kafka's errors; and confluent-kafka's consumer (librdkafka, ``group.protocol=consumer``,
which needs v1) sharing a topic, committing, taking over a leaver's partitions and following a
regex subscription to a topic created after it subscribed."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_VERSIONS, METADATA, CREATE_TOPICS, DELETE_TOPICS, HEARTBEAT, DESCRIBE = 18, 3, 19, 20, 68, 69
INTERVAL_MS = 250
SETTINGS = {"group.consumer.heartbeat.interval.ms": str(INTERVAL_MS),
            "offsets.topic.num.partitions": "3"}
DEADLINE_S = 60  # bounds every wait on a loaded machine; conditions end the waits much sooner
PARTITIONS = 4
RECORDS_PER_PARTITION = 10


def req(name: str):
    return messages.get(name + "Request").cls


Hb, Describe = req("ConsumerGroupHeartbeat"), req("ConsumerGroupDescribe")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("kip848v1") / "data", SETTINGS)
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(client, name: str, partitions: int) -> None:
    Create = req("CreateTopics")
    [result] = client.request(CREATE_TOPICS, 7, Create(topics=[Create.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=5000)).topics
    assert result.error_code == ErrorCode.NONE, result.error_message


def delete_topic(client, name: str) -> None:
    Delete = req("DeleteTopics")
    [result] = client.request(DELETE_TOPICS, 6, Delete(
        topics=[Delete.DeleteTopicState(name=name)], timeout_ms=5000)).responses
    assert result.error_code == ErrorCode.NONE, result.error_message


@dataclass
class Member:
    """A v1 member over the raw wire: its own id, its epoch and what it holds."""

    group: str
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    held: dict[uuid.UUID, list[int]] = field(default_factory=dict)

    def heartbeat(self, client, names=None, regex=None, version=1):
        """A join (epoch 0) or a full heartbeat reporting what the member holds."""
        response = client.request(HEARTBEAT, version, Hb(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout_ms=30_000, subscribed_topic_names=names,
            subscribed_topic_regex=regex, topic_partitions=[
                Hb.TopicPartitions(topic_id=t, partitions=p) for t, p in self.held.items()]))
        if response.error_code == ErrorCode.NONE:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.held = {t.topic_id: sorted(t.partitions)
                             for t in response.assignment.topic_partitions}
        return response

    def holds(self, client) -> dict[str, list[int]]:
        """What it holds, by topic name (a deleted topic's partitions are left out)."""
        return {name: self.held[tid] for tid, name in _names(client, self.held).items()}

    def until(self, client, condition, **subscription) -> None:
        """Heartbeat (as a member does, every interval) until what it holds meets ``condition``."""
        deadline = time.monotonic() + DEADLINE_S
        while not condition(self.holds(client)):
            assert time.monotonic() < deadline, f"holds {self.holds(client)}"
            response = self.heartbeat(client, **subscription)
            assert response.error_code == ErrorCode.NONE, response.error_message
            time.sleep(INTERVAL_MS / 1000)


def _names(client, held: dict[uuid.UUID, list[int]]) -> dict[uuid.UUID, str]:
    """Topic ids to names, by the topics the broker lists (a deleted topic has none)."""
    Metadata = req("Metadata")
    listed = client.request(METADATA, 12, Metadata(topics=None)).topics
    return {t.topic_id: t.name for t in listed if t.topic_id in held}


def describe(client, group: str, version: int = 1, operations: bool = False):
    [described] = client.request(DESCRIBE, version, Describe(
        group_ids=[group], include_authorized_operations=operations)).groups
    return described


# ---- the raw wire ------------------------------------------------------------------------------

def test_api_versions_advertise_v1(client):
    response = client.request(API_VERSIONS, 3, req("ApiVersions")(
        client_software_name="test", client_software_version="1"))
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[HEARTBEAT] == (0, 1) and versions[DESCRIBE] == (0, 1)


def test_v1_member_keeps_the_id_it_made_and_describe_shows_its_type(client):
    topic = unique("names")
    create_topic(client, topic, 3)
    member = Member(unique("g"))
    joined = member.heartbeat(client, names=[topic])
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (
        ErrorCode.NONE, member.member_id, 1)
    assert member.holds(client) == {topic: [0, 1, 2]}
    [described] = describe(client, member.group).members
    assert (described.member_id, described.member_type, described.subscribed_topic_names,
            described.subscribed_topic_regex) == (member.member_id, 1, [topic], None)
    [v0] = describe(client, member.group, version=0).members
    assert (v0.member_id, v0.member_type) == (member.member_id, -1)  # not in v0: the default
    # no authorizer: every group operation when asked for (Kafka's 3400), else "not asked"
    assert describe(client, member.group).authorized_operations == -2147483648
    assert describe(client, member.group, operations=True).authorized_operations == 3400


@pytest.mark.parametrize(("member_id", "regex", "code", "message"), [
    ("", None, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    ("  ", None, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    (None, "(", ErrorCode.INVALID_REGULAR_EXPRESSION,
     "SubscribedTopicRegex `(` is not a valid regular expression: missing closing )."),
    (None, "(?<=a)b", ErrorCode.INVALID_REGULAR_EXPRESSION,
     ("SubscribedTopicRegex `(?<=a)b` is not a valid regular expression: invalid or "
      "unsupported Perl syntax.")),
])
def test_v1_join_errors(client, member_id, regex, code, message):
    member = Member(unique("g"))
    if member_id is not None:
        member.member_id = member_id
    response = member.heartbeat(client, names=None if regex else ["events"], regex=regex)
    assert (response.error_code, response.error_message) == (code, message)
    assert describe(client, member.group).error_code == ErrorCode.GROUP_ID_NOT_FOUND  # not made


def test_v0_join_still_gets_an_id_from_the_broker(client):
    member = Member(unique("g"), member_id="")
    response = member.heartbeat(client, names=["events"], version=0)
    assert response.error_code == ErrorCode.NONE and response.member_id
    assert response.member_epoch == 1


def test_names_and_regex_together_subscribe_to_both(client):
    """Kafka takes both in one member: it subscribes to the names and to the regex's topics."""
    prefix = unique("both")
    named, matched = f"{prefix}-named", f"{prefix}-matched"
    create_topic(client, named, 1)
    create_topic(client, matched, 2)
    member = Member(unique("g"))
    assert member.heartbeat(client, names=[named], regex=f"{prefix}-m.*").error_code == 0
    assert member.holds(client) == {named: [0], matched: [0, 1]}


def test_regex_follows_topics_created_and_deleted_later(client):
    prefix = unique("rx")
    create_topic(client, f"{prefix}-a", 2)
    create_topic(client, f"other-{prefix}", 1)  # matches only a regex searched, not anchored
    member = Member(unique("g"))
    regex = f"{prefix}-.*"
    assert member.heartbeat(client, regex=regex).error_code == ErrorCode.NONE
    assert member.holds(client) == {f"{prefix}-a": [0, 1]}
    [described] = describe(client, member.group).members
    assert (described.subscribed_topic_regex, described.subscribed_topic_names) == (regex, [])
    epoch = member.epoch
    create_topic(client, f"{prefix}-b", 3)
    member.until(client, lambda held: f"{prefix}-b" in held)
    assert member.holds(client) == {f"{prefix}-a": [0, 1], f"{prefix}-b": [0, 1, 2]}
    assert member.epoch > epoch
    delete_topic(client, f"{prefix}-a")
    member.until(client, lambda held: list(held) == [f"{prefix}-b"])


def test_regex_subscription_survives_a_restart(tmp_path):
    """The regex is in the member's record (ConsumerGroupMemberMetadataValue): after a
    restart the member carries on at its epoch, and a topic created then is still picked up."""
    process = BrokerProcess(tmp_path / "data", SETTINGS)
    process.start()
    try:
        with WireClient(process.bootstrap) as client:
            create_topic(client, "kept-a", 2)
            member = Member(unique("g"))
            assert member.heartbeat(client, regex="kept-.*").error_code == ErrorCode.NONE
            assert member.heartbeat(client).error_code == ErrorCode.NONE
        assert process.stop() == 0, process.log_tail()
        process.start()
        with WireClient(process.bootstrap) as client:
            [described] = describe(client, member.group).members
            assert (described.member_id, described.subscribed_topic_regex,
                    described.member_epoch) == (member.member_id, "kept-.*", member.epoch)
            again = member.heartbeat(client)
            assert (again.error_code, again.member_epoch) == (ErrorCode.NONE, 1)
            create_topic(client, "kept-b", 1)
            member.until(client, lambda held: held == {"kept-a": [0, 1], "kept-b": [0]})
    finally:
        process.kill()


def test_metadata_by_id_with_an_empty_name(client):
    """kafka-clients 4 learn the name of a topic a regex brought them by its id, sending an
    empty name with it (the id decides, as in Kafka)."""
    topic = unique("byid")
    create_topic(client, topic, 1)
    Metadata = req("Metadata")
    [listed] = [t for t in client.request(METADATA, 12, Metadata(topics=None)).topics
                if t.name == topic]
    unknown = uuid.uuid4()
    found = client.request(METADATA, 12, Metadata(topics=[
        Metadata.MetadataRequestTopic(topic_id=i, name="") for i in (listed.topic_id, unknown)]))
    assert [(t.error_code, t.name, t.topic_id) for t in found.topics] == [
        (ErrorCode.NONE, topic, listed.topic_id), (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)]


# ---- confluent-kafka (librdkafka) with group.protocol=consumer ---------------------------------

def consumer(broker, group: str) -> Consumer:
    # librdkafka refuses session, heartbeat and assignment strategy settings with this protocol
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})


def produce(broker, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(partitions * RECORDS_PER_PARTITION):
        producer.produce(topic, b"v-%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def create_topics(broker, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for done in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        done.result(30)


def poll_until(consumers: list[Consumer], condition, seen: set) -> None:
    """Poll every consumer in turn (recording what they read) until ``condition()`` holds."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, (
            [sorted(tp.partition for tp in c.assignment()) for c in consumers], len(seen))
        for c in consumers:
            message = c.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                seen.add((message.topic(), message.partition(), message.offset()))


def partitions(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


def test_confluent_consumers_share_a_topic_commit_and_take_over(broker):
    topic, group = unique("cf"), unique("cf-group")
    create_topics(broker, topic)
    produce(broker, topic, PARTITIONS)
    a, b = consumer(broker, group), consumer(broker, group)
    seen: set = set()
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        poll_until([a, b], lambda: len(seen) == PARTITIONS * RECORDS_PER_PARTITION and
                   partitions(a) and partitions(b) and
                   sorted(partitions(a) + partitions(b)) == list(range(PARTITIONS)), seen)
        for c in (a, b):
            c.commit(asynchronous=False)
        b.close()
        poll_until([a], lambda: partitions(a) == list(range(PARTITIONS)), seen)
        committed = a.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
        assert [tp.offset for tp in committed] == [RECORDS_PER_PARTITION] * PARTITIONS
    finally:
        a.close()


def test_confluent_regex_subscription_picks_up_a_later_topic(broker):
    prefix, group = unique("cfrx"), unique("cfrx-group")
    first, later = f"{prefix}-first", f"{prefix}-later"
    create_topics(broker, first)
    produce(broker, first, PARTITIONS)
    c = consumer(broker, group)
    seen: set = set()
    try:
        c.subscribe([f"^{prefix}-.*"])
        poll_until([c], lambda: len(seen) == PARTITIONS * RECORDS_PER_PARTITION, seen)
        create_topics(broker, later)
        produce(broker, later, PARTITIONS)
        poll_until([c], lambda: len(seen) == 2 * PARTITIONS * RECORDS_PER_PARTITION, seen)
        assert {t for t, _, _ in seen} == {first, later}
        assert {tp.topic for tp in c.assignment()} == {first, later}
    finally:
        c.close()
