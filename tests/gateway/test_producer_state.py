"""ProducerStateManager: Kafka's per producer-partition epoch and sequence rules."""
from __future__ import annotations

import time

import pytest

from commitgate.gateway.partition_txns import AbortedTxn
from commitgate.gateway.producer_state import CACHED_BATCHES, MAX_SEQUENCE, ProducerStateManager
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_batch,
    build_control_batch,
    read_header,
)

TOPIC = "3f1c7a52-0000-4000-8000-000000000001"
PID = 7


def header(seq: int, records: int = 1, *, epoch: int = 0, pid: int = PID, ts: int = 1_000,
           transactional: bool = False):
    return read_header(build_batch([(None, b"v", [], ts)] * records, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq,
                                   transactional=transactional))


class Log:
    """The manager plus a fake offset counter, appending what check() lets through."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.end = 0

    def send(self, batch, partition: int = 0):
        verdict = self.state.check(TOPIC, partition, batch)
        if verdict.error is ErrorCode.NONE and verdict.duplicate is None:
            self.state.record(TOPIC, partition, batch, self.end, batch.max_timestamp,
                              self.end + 100)
            self.end += batch.offset_count
        return verdict


@pytest.fixture
def log() -> Log:
    return Log()


def test_in_sequence_batches_are_accepted(log):
    for seq in (0, 2, 5):
        assert log.send(header(seq, records=2 if seq == 0 else 3)).error is ErrorCode.NONE
    assert log.end == 8


def test_a_retry_of_any_of_the_last_five_batches_is_a_duplicate(log):
    for seq in range(7):
        log.send(header(seq))
    for seq in range(7 - CACHED_BATCHES, 7):
        verdict = log.send(header(seq))
        assert verdict.error is ErrorCode.NONE
        assert verdict.duplicate.base_offset == seq
    assert log.end == 7
    # the sixth-newest is forgotten: its retry is out of order, as in Kafka
    assert log.send(header(1)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_duplicate_needs_the_same_sequence_range(log):
    log.send(header(0, records=3))
    assert log.send(header(0, records=2)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_gap_is_out_of_order(log):
    log.send(header(0))
    assert log.send(header(2)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.send(header(1)).error is ErrorCode.NONE


def test_an_older_epoch_is_fenced_and_a_newer_one_starts_at_zero(log):
    log.send(header(0, epoch=1))
    assert log.send(header(1, epoch=0)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.send(header(0, epoch=0)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.send(header(3, epoch=2)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.send(header(0, epoch=2)).error is ErrorCode.NONE
    assert log.send(header(1, epoch=1)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    # the bump cleared the cache: a retry from the old epoch is no duplicate any more
    assert log.send(header(0, epoch=2)).duplicate is not None


def test_epochs_are_per_partition_as_in_kafka(log):
    log.send(header(0, epoch=3), partition=0)
    assert log.send(header(0, epoch=1), partition=1).error is ErrorCode.NONE


def test_an_unknown_producer_may_start_at_any_sequence(log):
    assert log.send(header(42)).error is ErrorCode.NONE
    assert log.send(header(43)).error is ErrorCode.NONE
    assert log.send(header(40, pid=PID + 1)).error is ErrorCode.NONE


def test_sequences_wrap_after_the_largest_int32(log):
    assert log.send(header(MAX_SEQUENCE - 1, records=2)).error is ErrorCode.NONE
    wrapped = header(0, records=2)
    assert log.send(wrapped).error is ErrorCode.NONE
    assert log.send(header(MAX_SEQUENCE - 1, records=2)).duplicate.base_offset == 0
    assert header(MAX_SEQUENCE, records=3).last_sequence == 1  # a batch across the wrap


def test_non_idempotent_batches_are_never_checked(log):
    for _ in range(3):
        assert log.send(header(-1, pid=-1, epoch=-1)).duplicate is None
    assert log.state.entries == {}
    assert log.state.covered == 2 + 100  # where the last append ended


def test_a_producer_id_without_a_sequence_is_an_invalid_record(log):
    assert log.send(header(-1)).error is ErrorCode.INVALID_RECORD


def marker(commit: bool, *, epoch: int = 0, pid: int = PID):
    return read_header(build_control_batch(commit, pid, epoch, 1_000))


def record_marker(log: Log, commit: bool, epoch: int = 0) -> int:
    offset = log.end
    log.state.record(TOPIC, 0, marker(commit, epoch=epoch), offset, 1_000, offset + 100,
                     CONTROL_COMMIT if commit else CONTROL_ABORT)
    log.end += 1
    return offset


def test_transactions_set_the_stable_offset_and_markers_close_them(log):
    txns, key = log.state.txns, (TOPIC, 0)
    log.send(header(0, 2))  # offsets 0-1, outside any transaction
    assert txns.stable_offset(key, log.end) == 2
    log.send(header(2, 3, transactional=True))  # offsets 2-4 open a transaction
    log.send(header(0, 1, pid=PID + 1, transactional=True))  # offset 5, another producer's
    assert txns.stable_offset(key, log.end) == 2
    aborted_at = record_marker(log, commit=False)  # offset 6: producer PID aborts
    assert txns.stable_offset(key, log.end) == 5
    assert txns.aborted_between(key, 0, log.end) == [AbortedTxn(PID, 2, aborted_at)]
    assert txns.aborted_between(key, aborted_at + 1, log.end) == []
    # sequences carry on across a marker, which has none of its own
    assert log.send(header(5, 1, transactional=True)).error is ErrorCode.NONE
    log.state.record(TOPIC, 0, marker(True, pid=PID + 1), log.end, 1_000, log.end + 100,
                     CONTROL_COMMIT)
    log.end += 1
    assert txns.stable_offset(key, log.end) == 7  # PID's new transaction, from offset 7
    assert txns.open_producers(key) == {PID: 7}


def test_a_marker_with_a_newer_epoch_fences_the_older_one(log):
    log.send(header(0, 1, transactional=True))
    record_marker(log, commit=False, epoch=1)  # the coordinator's fencing abort
    assert log.send(header(1, 1, transactional=True)).error is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.send(header(0, 1, epoch=1, transactional=True)).error is ErrorCode.NONE


def test_producers_expire_by_their_last_batch_timestamp(log):
    now = int(time.time() * 1000)
    log.send(header(0, ts=now - 10_000))
    log.send(header(0, pid=PID + 1, ts=now))
    log.state.dirty = False
    assert log.state.expire(now, 5_000) == 1
    assert [key[0] for key in log.state.entries] == [PID + 1]
    assert log.state.dirty
    # forgotten: the next batch may start anywhere again
    assert log.send(header(9)).error is ErrorCode.NONE


def test_state_of_deleted_topics_is_dropped(log):
    log.send(header(0))
    assert log.state.retain_topics([TOPIC]) == 0
    assert log.state.retain_topics(["another-topic-id"]) == 1
    assert log.state.entries == {}


def test_replay_ignores_a_copy_of_a_batch_it_has_seen(log):
    for seq in (0, 3, 6):
        assert log.send(header(seq, 3)).error is ErrorCode.NONE
    # the cleaner's copy of the first batch (offset 0), replayed after the newer ones
    log.state.record(TOPIC, 0, header(0, 3), 0, 1_000, log.end + 500)
    assert log.send(header(9, 3)).error is ErrorCode.NONE
    assert log.send(header(3, 3)).duplicate is not None
    # a copy from an older epoch does not fence the current one either
    log.state.record(TOPIC, 0, header(0, 3, epoch=0), 3, 1_000, log.end + 600)
    assert log.send(header(12, 3)).error is ErrorCode.NONE


def test_replay_puts_older_copies_back_among_the_last_batches(log):
    batches = [header(seq, 3) for seq in (0, 3, 6)]
    # replay met the newest batch first, then the copies of the older ones (their originals
    # gone): all three are recognised
    log.state.record(TOPIC, 0, batches[2], 6, 1_000, 900)
    log.state.record(TOPIC, 0, batches[0], 0, 1_000, 1_000)
    log.state.record(TOPIC, 0, batches[1], 3, 1_000, 1_100)
    log.end = 9
    assert [log.send(b).duplicate.base_offset for b in batches] == [0, 3, 6]
    assert log.send(header(9, 3)).error is ErrorCode.NONE


def test_a_producer_with_an_open_transaction_does_not_expire(log):
    now = int(time.time() * 1000)
    log.send(header(0, 1, transactional=True, ts=now - 10_000))
    log.send(header(0, 1, pid=PID + 1, ts=now - 10_000))
    assert log.state.expire(now, 5_000) == 1  # only the producer outside a transaction
    record_marker(log, commit=True)
    assert log.state.expire(now, 5_000) == 1
