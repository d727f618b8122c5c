"""Idempotent producer state survives restarts: after a SIGKILL, a clean stop, and a SIGKILL
that follows a snapshot, a retried batch is answered with its original offset and stored once."""
from __future__ import annotations

import time

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway import producer_snapshot
from commitgate.protocol.errors import ErrorCode
from tests.gateway.idempotent_wire import (
    create,
    idempotent_batch,
    init_producer_id,
    produce,
    stored,
)

TOPIC = "idempotent-restart"
SNAPSHOT_WAIT_S = 20.0


def _first_life(broker) -> int:
    """Create the topic, get a producer id, store two batches (offsets 0-2 and 3-4)."""
    with WireClient(broker.bootstrap) as client:
        create(client, TOPIC)
        pid = init_producer_id(client).producer_id
        assert produce(client, TOPIC, idempotent_batch(pid, 0, 3)).base_offset == 0
        assert produce(client, TOPIC, idempotent_batch(pid, 3, 2)).base_offset == 3
    return pid


def _retries_are_recognised(broker, pid: int) -> None:
    with WireClient(broker.bootstrap) as client:
        for seq, records, offset in ((3, 2, 3), (0, 3, 0)):
            out = produce(client, TOPIC, idempotent_batch(pid, seq, records))
            assert (out.error_code, out.base_offset) == (ErrorCode.NONE, offset)
        assert produce(client, TOPIC, idempotent_batch(pid, 9)).error_code == \
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, TOPIC, idempotent_batch(pid, 5)).base_offset == 5
        assert [r.value for r in stored(client, TOPIC)] == \
            [b"0-0", b"0-1", b"0-2", b"3-0", b"3-1", b"5-0", b"5-1"]


def test_a_retry_after_sigkill_is_recognised(fresh_broker):
    pid = _first_life(fresh_broker)
    fresh_broker.kill()
    fresh_broker.start()
    _retries_are_recognised(fresh_broker, pid)


def test_a_retry_after_a_clean_restart_is_recognised(fresh_broker):
    pid = _first_life(fresh_broker)
    assert fresh_broker.stop() == 0
    assert producer_snapshot.read(fresh_broker.data_dir / "broker" / "producer_state")
    fresh_broker.start()
    _retries_are_recognised(fresh_broker, pid)
    assert "from a snapshot, 0 CommitLog entries replayed" in fresh_broker.log_tail(200)


def _wait_for_snapshot_of(broker, pid: int) -> None:
    """Until the periodic snapshot holds the producer (bounded: it is written every 50 ms)."""
    path = broker.data_dir / "broker" / "producer_state"
    deadline = time.monotonic() + SNAPSHOT_WAIT_S
    while time.monotonic() < deadline:
        snapshot = producer_snapshot.read(path)
        if snapshot and any(key[0] == pid for key in snapshot[1]):
            return
        time.sleep(0.05)
    raise AssertionError(f"no snapshot of producer {pid} within {SNAPSHOT_WAIT_S}s")


def test_a_retry_after_sigkill_past_a_snapshot_is_recognised(fresh_broker):
    fresh_broker.stop()
    fresh_broker.overrides["producer.snapshot.interval.ms"] = "50"
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as client:
        create(client, TOPIC)
        pid = init_producer_id(client).producer_id
        assert produce(client, TOPIC, idempotent_batch(pid, 0, 3)).base_offset == 0
        _wait_for_snapshot_of(fresh_broker, pid)
        # the next snapshot may or may not catch this one: the replay after it covers the rest
        assert produce(client, TOPIC, idempotent_batch(pid, 3, 2)).base_offset == 3
    fresh_broker.kill()
    fresh_broker.start()
    assert "(from a snapshot," in fresh_broker.log_tail(200)
    _retries_are_recognised(fresh_broker, pid)
