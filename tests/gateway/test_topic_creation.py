"""Topic creation over the raw wire: max.broker.partitions bounds CreateTopics (validate-only,
default counts), CreatePartitions and auto-creation; creating a topic of many partitions runs
off the event loop, racing creations of one name give one TOPIC_ALREADY_EXISTS, and a produce
never sees a topic half made."""
from __future__ import annotations

import selectors
import time

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.gateway.test_admin_wire import SET, TOPIC, _describe, _incremental
from tests.gateway.test_internal_topics import (
    CREATE_TOPICS,
    Create,
    _create,
    _delete_by_name,
    _grow,
    _metadata,
    _produce,
)

API_VERSIONS = 18
LIMIT = 10
ApiVersions = messages.get("ApiVersionsRequest").cls


@pytest.fixture
def limited_broker(tmp_path) -> BrokerProcess:
    process = BrokerProcess(tmp_path / "data", {"max.broker.partitions": str(LIMIT),
                                                "num.partitions": "3"})
    process.start()
    yield process
    process.kill()


def _over_limit(result) -> None:
    assert result.error_code == ErrorCode.POLICY_VIOLATION, result
    assert f"max.broker.partitions={LIMIT}" in result.error_message


def _partitions(client: WireClient, name: str) -> int:
    topic = _metadata(client, name)
    return len(topic.partitions) if topic.error_code == ErrorCode.NONE else 0


def test_max_broker_partitions_bounds_every_way_to_add_partitions(limited_broker):
    with WireClient(limited_broker.bootstrap) as client:
        assert _create(client, "a", 4).error_code == ErrorCode.NONE
        _over_limit(_create(client, "b", 7, validate_only=True))
        assert _create(client, "b", 6, validate_only=True).error_code == ErrorCode.NONE
        assert _partitions(client, "b") == 0  # validated, not created
        assert _create(client, "b", -1).num_partitions == 3  # num.partitions: 7 in all
        _over_limit(_grow(client, "a", 8))
        assert _partitions(client, "a") == 4
        assert _grow(client, "a", 7).error_code == ErrorCode.NONE  # exactly the limit
        assert _partitions(client, "a") == 7
        _over_limit(_create(client, "c", 1))
        auto = _metadata(client, "d", auto_create=True)
        assert auto.error_code == ErrorCode.POLICY_VIOLATION
        assert _partitions(client, "d") == 0
        assert _delete_by_name(client, "b", 6).error_code == ErrorCode.NONE
        assert _metadata(client, "d", auto_create=True).error_code == ErrorCode.NONE  # 10
        _over_limit(_create(client, "e", 1))
    limited_broker.restart()  # the count is the table's: it holds after a restart
    with WireClient(limited_broker.bootstrap) as client:
        _over_limit(_create(client, "e", 1))
        assert {name: _partitions(client, name) for name in "abcd"} == \
            {"a": 7, "b": 0, "c": 0, "d": 3}


def _send_create(client: WireClient, name: str, partitions: int) -> None:
    request = Create(topics=[Create.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1)], timeout_ms=60_000)
    client.send_raw(client.frame(CREATE_TOPICS, 7, request))


def _readable(client: WireClient) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(client.sock, selectors.EVENT_READ)
        return bool(selector.select(timeout=0))


def test_creating_many_partitions_leaves_the_loop_serving(broker):
    partitions = 5_000
    with WireClient(broker.bootstrap, timeout_s=120) as creator, \
            WireClient(broker.bootstrap) as other:
        _send_create(creator, "wide", partitions)
        # ApiVersions answered while the creation's answer had not come: a loop blocked by the
        # creation would answer them after it (the answer to the creation is written first)
        answered_while_creating = 0
        for _ in range(100_000):  # bounded; the creation ends long before
            if _readable(creator):
                break
            versions = other.request(API_VERSIONS, 3, ApiVersions(
                client_software_name="t", client_software_version="1"))
            assert versions.error_code == ErrorCode.NONE
            answered_while_creating += not _readable(creator)
        created = creator.read_response(CREATE_TOPICS, 7).topics[0]
        assert (created.error_code, created.num_partitions) == (ErrorCode.NONE, partitions)
        assert answered_while_creating > 0
        assert _partitions(other, "wide") == partitions
        assert _produce(other, "wide", partitions - 1).error_code == ErrorCode.NONE
        assert _delete_by_name(other, "wide", 6).error_code == ErrorCode.NONE
        # its directories go after the answer, off the loop; a new topic of the name is empty
        assert _create(other, "wide", 1).error_code == ErrorCode.NONE
        assert _produce(other, "wide", 0).base_offset == 0
    queues = broker.data_dir / "consumequeue"
    deadline = time.monotonic() + 120
    while any(p.name.startswith("~deleted~") for p in queues.iterdir()) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(p.name for p in (queues / "wide").iterdir()) == ["0"]
    assert not any(p.name.startswith("~deleted~") for p in queues.iterdir())


def test_racing_creations_of_one_name_give_one_success(broker):
    with WireClient(broker.bootstrap) as first, WireClient(broker.bootstrap) as second, \
            WireClient(broker.bootstrap) as producer:
        _send_create(first, "raced", 2_000)
        _send_create(second, "raced", 2_000)
        # produced to while being created: not there yet, or there whole; never half made
        seen = _produce(producer, "raced", 1_999).error_code
        assert seen in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        codes = sorted(c.read_response(CREATE_TOPICS, 7).topics[0].error_code
                       for c in (first, second))
        assert codes == [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS]
        assert _produce(producer, "raced", 1_999).error_code == ErrorCode.NONE
        assert _partitions(producer, "raced") == 2_000


def test_an_answered_config_change_survives_a_sigkill(tmp_path):
    """AlterConfigs writes topics.json off the loop, before its answer."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with WireClient(broker.bootstrap) as client:
            assert _create(client, "configured", 1).error_code == ErrorCode.NONE
            out = _incremental(client, TOPIC, "configured", [("retention.ms", SET, "12345")])
            assert out.error_code == ErrorCode.NONE
        broker.kill()
        broker.start()
        with WireClient(broker.bootstrap) as client:
            configs = _describe(client, TOPIC, "configured", ["retention.ms"]).configs
            assert [(c.name, c.value) for c in configs] == [("retention.ms", "12345")]
    finally:
        broker.kill()
