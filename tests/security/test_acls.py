"""ACL authorization with real clients over SASL: ACLs made, listed and deleted with
confluent-kafka's AdminClient; produce allowed but not read, refused on Fetch and on joining the
group; prefixed ACLs; deny beats allow; the super user; transactional ids; ACLs kept across a
restart and a SIGKILL; a listing of topics shows only what the principal may describe."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.security.conftest import SecureBroker, add_users, distinct_ports, secure_overrides

TIMEOUT_S = 30
Handshake = messages.get("SaslHandshakeRequest").cls
Authenticate = messages.get("SaslAuthenticateRequest").cls
DescribeAcls = messages.get("DescribeAclsRequest").cls
USERS = {"admin": ("SCRAM-SHA-512", "admin-secret"), "alice": ("SCRAM-SHA-512", "alice-secret"),
         "bob": ("SCRAM-SHA-512", "bob-secret")}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory, pki) -> SecureBroker:
    data = tmp_path_factory.mktemp("acls") / "data"
    add_users(data, USERS)
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    overrides = secure_overrides(ports, pki, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "group.initial.rebalance.delay.ms": "0"})
    with BrokerProcess(data, overrides, port=ports["PLAINTEXT"]) as broker:
        yield SecureBroker(broker, ports)


def _settings(broker: SecureBroker, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user][1]}


def _admin(broker: SecureBroker, user: str = "admin") -> AdminClient:
    return AdminClient(_settings(broker, user))


def _allow(principal: str, kind, name: str, operation, pattern=ResourcePatternType.LITERAL,
           permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", operation, permission)


def _create(broker: SecureBroker, *bindings: AclBinding) -> None:
    admin = _admin(broker)
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT_S)


def _topic(broker: SecureBroker, prefix: str = "t-") -> str:
    name = prefix + uuid.uuid4().hex[:8]
    admin = _admin(broker)
    for future in admin.create_topics([NewTopic(name, 1)]).values():
        future.result(TIMEOUT_S)
    return name


def _produce(broker: SecureBroker, user: str, topic: str, extra: dict | None = None) -> list:
    errors: list = []
    producer = Producer({**_settings(broker, user), "message.timeout.ms": 10_000,
                         **(extra or {})})
    producer.produce(topic, b"value", on_delivery=lambda err, _: errors.append(err))
    producer.flush(TIMEOUT_S)
    return errors


def _consume_error(broker: SecureBroker, user: str, topic: str, group: str | None) -> KafkaError:
    """The first error (or None after the first record) a consumer meets."""
    settings = {**_settings(broker, user), "group.id": group or f"{user}-assigned-{topic}",
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer(settings)
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, 0, 0)])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            return message.error()
        raise AssertionError(f"{user} met neither a record nor an error on {topic}")
    finally:
        consumer.close()


def test_acls_are_made_listed_and_deleted(acl_broker):
    topic = _topic(acl_broker)
    _create(acl_broker, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.READ),
            _allow("User:bob", ResourceType.GROUP, "g-", AclOperation.READ,
                   ResourcePatternType.PREFIXED))
    admin = _admin(acl_broker)
    mine = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(TIMEOUT_S)
    assert [(b.principal, b.operation) for b in mine] == [("User:alice", AclOperation.READ)]
    removed = admin.delete_acls([AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
        AclPermissionType.ANY)])
    [deleted] = [f.result(TIMEOUT_S) for f in removed.values()]
    assert [(b.name, b.resource_pattern_type) for b in deleted] == \
        [("g-", ResourcePatternType.PREFIXED)]
    with WireClient(acl_broker.bootstrap("SASL_PLAINTEXT")) as client:  # alice may not
        client.request(17, 1, Handshake(mechanism="PLAIN"))
        client.request(36, 2, Authenticate(auth_bytes=b"\0alice\0alice-secret"))
        answer = client.request(29, 3, DescribeAcls(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert (answer.error_code, answer.resources) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])


def test_produce_allowed_but_not_read_is_refused_on_fetch_and_on_joining(acl_broker):
    topic = _topic(acl_broker)
    _create(acl_broker, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
            _allow("User:alice", ResourceType.GROUP, "alice-", AclOperation.READ,
                   ResourcePatternType.PREFIXED))
    assert _produce(acl_broker, "alice", topic) == [None]
    error = _consume_error(acl_broker, "alice", topic, None)  # assigned: Fetch refuses it
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    error = _consume_error(acl_broker, "alice", topic, "alice-" + topic)  # subscribed
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert [e.code() for e in _produce(acl_broker, "bob", topic)] == \
        [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_read_and_group_acls_let_a_consumer_in(acl_broker):
    topic = _topic(acl_broker, "logs-")
    _create(acl_broker, _allow("User:bob", ResourceType.TOPIC, "logs-", AclOperation.READ,
                               ResourcePatternType.PREFIXED),
            _allow("User:bob", ResourceType.GROUP, "bob-", AclOperation.READ,
                   ResourcePatternType.PREFIXED))
    assert _produce(acl_broker, "admin", topic) == [None]
    assert _consume_error(acl_broker, "bob", topic, "bob-" + topic) is None
    error = _consume_error(acl_broker, "bob", topic, "other-" + topic)
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error


def test_deny_beats_allow_and_the_super_user_may_do_anything(acl_broker):
    topic = _topic(acl_broker, "secret-")
    everyone = _allow("User:*", ResourceType.TOPIC, "*", AclOperation.ALL)
    _create(acl_broker, everyone,
            _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE,
                   permission=AclPermissionType.DENY))
    try:
        assert [e.code() for e in _produce(acl_broker, "alice", topic)] == \
            [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert _produce(acl_broker, "bob", topic) == [None]
        assert _produce(acl_broker, "admin", topic) == [None]
    finally:  # the other tests of this broker must not inherit "everyone may do anything"
        admin = _admin(acl_broker)
        for future in admin.delete_acls([AclBindingFilter(
                ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:*", "*",
                AclOperation.ALL, AclPermissionType.ALLOW)]).values():
            future.result(TIMEOUT_S)


def test_transactional_ids_need_their_own_acl(acl_broker):
    topic = _topic(acl_broker)
    _create(acl_broker, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE))
    producer = Producer({**_settings(acl_broker, "alice"), "transactional.id": "alice-txn"})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _create(acl_broker, _allow("User:alice", ResourceType.TRANSACTIONAL_ID, "alice-",
                               AclOperation.WRITE, ResourcePatternType.PREFIXED))
    producer = Producer({**_settings(acl_broker, "alice"), "transactional.id": "alice-txn"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(TIMEOUT_S)


def test_a_listing_shows_only_describable_topics_and_acls_survive_restart_and_sigkill(
        acl_broker):
    hidden, shown = _topic(acl_broker, "hidden-"), _topic(acl_broker, "shown-")
    _create(acl_broker, _allow("User:bob", ResourceType.TOPIC, shown, AclOperation.DESCRIBE))
    assert _listed(acl_broker, "bob") & {hidden, shown} == {shown}
    acl_broker.process.kill()
    acl_broker.process.start()
    assert _listed(acl_broker, "bob") & {hidden, shown} == {shown}
    acl_broker.process.restart()
    assert _listed(acl_broker, "bob") & {hidden, shown} == {shown}
    assert {hidden, shown} <= _listed(acl_broker, "admin")


def _listed(broker: SecureBroker, user: str) -> set[str]:
    return set(_admin(broker, user).list_topics(timeout=TIMEOUT_S).topics)
