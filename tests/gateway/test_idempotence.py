"""Idempotent producers over the raw wire against a real broker: InitProducerId, and Kafka's
answers to retried, gapped, fenced and transactional batches."""
from __future__ import annotations

import itertools

import pytest

from commitgate.protocol.errors import ErrorCode
from tests.gateway.idempotent_wire import (
    create,
    idempotent_batch,
    init_producer_id,
    produce,
    stored,
)

TOPIC_NUMBERS = itertools.count()


@pytest.fixture
def topic(client) -> str:
    name = f"idempotence-{next(TOPIC_NUMBERS)}"
    create(client, name)
    return name


@pytest.fixture
def pid(client) -> int:
    out = init_producer_id(client)
    assert (out.error_code, out.producer_epoch) == (ErrorCode.NONE, 0)
    return out.producer_id


@pytest.mark.parametrize("version", [0, 2, 3, 4, 5])
def test_init_producer_id_hands_out_fresh_ids(client, version):
    first = init_producer_id(client, version=version)
    second = init_producer_id(client, version=version)
    assert first.error_code == second.error_code == ErrorCode.NONE
    assert second.producer_id > first.producer_id >= 0
    assert first.producer_epoch == second.producer_epoch == 0


def test_init_producer_id_with_its_id_and_epoch_gets_a_new_id_as_kafka(client, pid):
    # without a transactional id Kafka ignores them (KIP-360 bumps are client-side)
    out = init_producer_id(client, producer_id=pid, epoch=0)
    assert out.error_code == ErrorCode.NONE
    assert (out.producer_epoch, out.producer_id > pid) == (0, True)


@pytest.mark.parametrize("producer_id,epoch", [(-1, 0), (5, -1)])
def test_init_producer_id_needs_both_id_and_epoch(client, producer_id, epoch):
    out = init_producer_id(client, producer_id=producer_id, epoch=epoch)
    assert (out.error_code, out.producer_id, out.producer_epoch) == \
        (ErrorCode.INVALID_REQUEST, -1, -1)


def test_init_producer_id_with_a_transactional_id_bumps_its_epoch(client):
    assert init_producer_id(client, transactional_id="").error_code == ErrorCode.INVALID_REQUEST
    first = init_producer_id(client, transactional_id="txn-1")
    again = init_producer_id(client, transactional_id="txn-1")
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        ErrorCode.NONE, first.producer_id, 1)
    # KIP-360: only the current producer of the id may re-initialise with its id and epoch
    stale = init_producer_id(client, transactional_id="txn-1", producer_id=first.producer_id,
                             epoch=0)
    assert (stale.error_code, stale.producer_id) == (ErrorCode.PRODUCER_FENCED, -1)


@pytest.mark.parametrize("acks", [1, -1])
def test_a_retried_batch_gets_its_original_offset_and_is_stored_once(client, topic, pid, acks):
    first = produce(client, topic, idempotent_batch(pid, 0, 3), acks=acks)
    again = produce(client, topic, idempotent_batch(pid, 0, 3), acks=acks)
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 0)
    # Kafka answers a duplicate with the stored batch's max timestamp as its log append time
    assert again.log_append_time_ms == max(r.timestamp for r in stored(client, topic))
    assert produce(client, topic, idempotent_batch(pid, 3)).base_offset == 3
    assert [r.value for r in stored(client, topic)] == [b"0-0", b"0-1", b"0-2", b"3-0", b"3-1"]


def test_retries_of_each_of_the_last_five_batches_are_recognised(client, topic, pid):
    for seq in range(7):
        assert produce(client, topic, idempotent_batch(pid, seq, 1)).base_offset == seq
    for seq in range(2, 7):
        out = produce(client, topic, idempotent_batch(pid, seq, 1))
        assert (out.error_code, out.base_offset) == (ErrorCode.NONE, seq)
    assert produce(client, topic, idempotent_batch(pid, 1, 1)).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert len(stored(client, topic)) == 7


def test_a_gap_is_out_of_order_and_not_stored(client, topic, pid):
    produce(client, topic, idempotent_batch(pid, 0))
    out = produce(client, topic, idempotent_batch(pid, 5))
    assert (out.error_code, out.base_offset) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert out.error_message
    assert len(stored(client, topic)) == 2


def test_an_old_epoch_is_fenced_and_a_new_one_starts_at_zero(client, topic, pid):
    assert produce(client, topic, idempotent_batch(pid, 0, epoch=1)).error_code == ErrorCode.NONE
    out = produce(client, topic, idempotent_batch(pid, 2, epoch=0))
    assert out.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(client, topic, idempotent_batch(pid, 4, epoch=2)).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic, idempotent_batch(pid, 0, epoch=2)).base_offset == 2
    assert produce(client, topic, idempotent_batch(pid, 2, epoch=1)).error_code == \
        ErrorCode.INVALID_PRODUCER_EPOCH
    assert len(stored(client, topic)) == 4


def test_an_unknown_producer_may_start_at_any_sequence(client, topic, pid):
    assert produce(client, topic, idempotent_batch(pid, 1000)).error_code == ErrorCode.NONE
    assert produce(client, topic, idempotent_batch(pid, 1003)).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_wrap_around(client, topic, pid):
    assert produce(client, topic, idempotent_batch(pid, 2**31 - 2, 2)).error_code == \
        ErrorCode.NONE
    assert produce(client, topic, idempotent_batch(pid, 0, 2)).base_offset == 2
    assert produce(client, topic, idempotent_batch(pid, 2**31 - 2, 2)).base_offset == 0


def test_a_producer_id_without_a_sequence_is_an_invalid_record(client, topic, pid):
    out = produce(client, topic, idempotent_batch(pid, -1))
    assert out.error_code == ErrorCode.INVALID_RECORD
    assert stored(client, topic) == []


def test_transactional_batches_are_refused(client, topic, pid):
    out = produce(client, topic, idempotent_batch(pid, 0, transactional=True))
    assert out.error_code == ErrorCode.INVALID_TXN_STATE
    assert stored(client, topic) == []
