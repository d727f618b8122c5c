"""Producer state across restarts: the snapshot file and the CommitLog replay, on a real store."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from commitgate.engine import MessageStore
from commitgate.gateway import producer_snapshot
from commitgate.gateway.producer_snapshot_service import ProducerSnapshotService
from commitgate.gateway.producer_state import ProducerStateManager
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import build_batch, read_header
from tests.engine.conftest import open_store

PID = 11
DAY_MS = 86_400_000


def batch(seq: int, *, pid: int = PID, records: int = 2) -> memoryview:
    now = int(time.time() * 1000)
    return memoryview(bytearray(build_batch([(None, b"v%d" % i, [], now) for i in range(records)],
                                            producer_id=pid, producer_epoch=0,
                                            base_sequence=seq)))


def produce(store, state: ProducerStateManager, topic: str, body: memoryview) -> int:
    """What the Produce handler does for an accepted batch: append, then record."""
    header = read_header(body)
    result = store.append(topic, 0, body, offset_count=header.offset_count,
                          max_timestamp=header.max_timestamp)
    state.record(store.topic(topic).topic_id, 0, header, result.base_offset,
                 header.max_timestamp, result.phy_end)
    return result.base_offset


@contextlib.asynccontextmanager
async def store_with_topic(tmp_path) -> AsyncIterator[MessageStore]:
    async with open_store(tmp_path) as store:
        store.create_topic("t", 1)
        yield store


def service(store, tmp_path, state: ProducerStateManager | None = None):
    return ProducerSnapshotService(tmp_path / "producer_state", state or ProducerStateManager(),
                                   store, interval_ms=60_000, expiration_ms=DAY_MS)


def running(store, tmp_path) -> ProducerSnapshotService:
    keeper = service(store, tmp_path)
    keeper.restore()
    return keeper


def verdict(state: ProducerStateManager, store, topic: str, seq: int):
    return state.check(store.topic(topic).topic_id, 0, read_header(batch(seq)))


def test_without_a_snapshot_the_whole_commitlog_is_replayed(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            store.create_topic("other", 1)
            live = ProducerStateManager()
            for seq in range(0, 14, 2):
                produce(store, live, "t", batch(seq))
                produce(store, live, "other", batch(seq, pid=-1))
            restored = service(store, tmp_path)
            assert restored.restore() == 14
            assert restored.state.covered == live.covered
            assert {k: list(v.batches) for k, v in restored.state.entries.items()} == \
                {k: list(v.batches) for k, v in live.entries.items()}
            dup = verdict(restored.state, store, "t", 12)
            assert dup.duplicate.base_offset == 12
            assert verdict(restored.state, store, "t", 15).error is \
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    asyncio.run(body())


def test_a_snapshot_plus_the_tail_after_it(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            keeper = running(store, tmp_path)
            for seq in range(0, 6, 2):
                produce(store, keeper.state, "t", batch(seq))
            await keeper.round()
            covered, entries, _ = producer_snapshot.read(keeper.path)
            assert covered == keeper.state.covered and len(entries) == 1
            for seq in range(6, 10, 2):
                produce(store, keeper.state, "t", batch(seq))
            restored = service(store, tmp_path)
            assert restored.restore() == 2  # only the entries after the snapshot
            for seq, offset in ((2, 2), (4, 4), (6, 6), (8, 8)):
                assert verdict(restored.state, store, "t", seq).duplicate.base_offset == offset
            assert verdict(restored.state, store, "t", 10).error is ErrorCode.NONE
    asyncio.run(body())


def test_a_round_writes_only_when_something_changed(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            keeper = running(store, tmp_path)
            await keeper.round()  # the first one saves the next start the replay
            keeper.path.unlink()
            await keeper.round()
            assert not keeper.path.exists()
            produce(store, keeper.state, "t", batch(0))
            await keeper.round()
            assert keeper.path.exists()
    asyncio.run(body())


def test_a_snapshot_past_the_commitlog_end_is_discarded(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            state = ProducerStateManager()
            produce(store, state, "t", batch(0))
            stale = ProducerStateManager()
            stale.entries = {key: entry for key, entry in state.entries.items()}
            stale.covered = state.covered + 10_000  # as if recovery cut a torn tail
            producer_snapshot.write(tmp_path / "producer_state", producer_snapshot.take(stale))
            restored = service(store, tmp_path)
            assert restored.restore() == 1  # rebuilt from the whole CommitLog instead
            assert restored.state.covered == state.covered
    asyncio.run(body())


def test_a_damaged_snapshot_is_ignored(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            produce(store, ProducerStateManager(), "t", batch(0))
            (tmp_path / "producer_state").write_bytes(b'{"version": 1, "covered": ')
            restored = service(store, tmp_path)
            assert restored.restore() == 1
            assert verdict(restored.state, store, "t", 0).duplicate is not None
    asyncio.run(body())


def test_deleted_and_recreated_topics_do_not_inherit_state(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            keeper = running(store, tmp_path)
            produce(store, keeper.state, "t", batch(0))
            await keeper.round()  # the snapshot holds the first topic's state
            produce(store, keeper.state, "t", batch(2))  # and the CommitLog some more
            store.delete_topic("t")
            store.create_topic("t", 1)
            restored = service(store, tmp_path)
            restored.restore()
            assert restored.state.entries == {}
            assert verdict(restored.state, store, "t", 0).duplicate is None
    asyncio.run(body())


def test_expired_producers_are_not_restored(tmp_path):
    async def body():
        async with store_with_topic(tmp_path) as store:
            old = build_batch([(None, b"v", [], 1_000)], producer_id=PID, producer_epoch=0,
                              base_sequence=0)
            produce(store, ProducerStateManager(), "t", memoryview(bytearray(old)))
            restored = service(store, tmp_path)
            restored.restore()
            assert restored.state.entries == {}
    asyncio.run(body())


@pytest.mark.parametrize("data", [b"", b"[]", b'{"version": 3, "covered": 0, "producers": []}',
                                  (b'{"version": 2, "covered": 0, "producers": [], '
                                   b'"open_txns": [["x", 0]]}'),
                                  b'{"version": 1, "covered": 0, "producers": [[1, "x", 0]]}'])
def test_malformed_snapshots_raise_value_error(data):
    with pytest.raises(ValueError):
        producer_snapshot.decode(data)
