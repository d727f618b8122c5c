"""Keys handed from produce validation to the IndexBuilder (engine.index_builder.KeyHandoff):
a compressed batch whose keys the append brings is indexed from them without being
decompressed again; the handoff is bounded; an undone append leaves no keys behind for the
position the next entry takes; without handed keys the builder reads them itself."""
from __future__ import annotations

import time

import pytest

from commitgate.engine import MessageStore, StoreConfig, StoreStatus, index_builder
from commitgate.engine.dispatcher import Dispatcher
from commitgate.engine.index_builder import KEY_OVERHEAD, KeyHandoff
from commitgate.protocol.record_batch import KafkaBodyFormat, RecordSetStatus, validate_record_set
from tests.c_and_python import IMPLEMENTATIONS, c_helper
from tests.engine.conftest import SMALL, batch

CODECS = ("gzip", "snappy", "lz4", "zstd")
INDEXED_DEADLINE_S = 60
BIG = 1 << 20


class CountingFormat(KafkaBodyFormat):
    """The Kafka BodyFormat, counting the batches whose keys the store reads itself."""

    def __init__(self) -> None:
        self.keys_calls = 0

    def keys(self, body: memoryview) -> list[bytes]:
        self.keys_calls += 1
        return super().keys(body)


async def _open(tmp_path, **overrides) -> tuple[MessageStore, CountingFormat]:
    body_format = CountingFormat()
    store = MessageStore(StoreConfig(data_dir=tmp_path / "data", **{**SMALL, **overrides}),
                         body_format)
    await store.open()
    store.create_topic("t", 1)
    return store, body_format


async def _indexed(store: MessageStore) -> None:
    """Wait (boundedly) until the IndexBuilder has indexed everything dispatched."""
    end = store.dispatcher.dispatched_offset
    deadline = time.monotonic() + INDEXED_DEADLINE_S
    while store.index.indexed < end:
        assert time.monotonic() < deadline, "the IndexBuilder did not catch up"
        await store.index.catch_up(end)


def _compressed(codec: str, keys: list[bytes | None]) -> memoryview:
    return batch([b"value-%d" % i * 20 for i in range(len(keys))], keys=keys, compression=codec)


def _validated_append(store: MessageStore, body: memoryview, count: int):
    """What produce does: validate with the store's key room, append with the keys."""
    check = validate_record_set(body, BIG, key_budget=store.key_room)
    assert check.status is RecordSetStatus.OK
    result = store.append("t", 0, body, offset_count=count, max_timestamp=1_000,
                          keys=check.keys)
    assert result.status is StoreStatus.OK, result
    return check, result


@pytest.mark.parametrize("walk", IMPLEMENTATIONS)
def test_handed_over_keys_are_indexed_without_decompressing_again(tmp_path, run, walk,
                                                                 monkeypatch):
    if walk == "c":
        c_helper("engine._commit_log")
    else:
        monkeypatch.setattr(index_builder, "_follow", None)

    async def body():
        store, body_format = await _open(tmp_path)
        try:
            bases = {}
            for codec in CODECS:
                keys = [b"%s-%d" % (codec.encode(), i) if i % 4 else None for i in range(40)]
                check, result = _validated_append(store, _compressed(codec, keys), len(keys))
                assert check.keys == [key for key in keys if key is not None]
                bases[codec] = result.base_offset
            await _indexed(store)
            assert body_format.keys_calls == 0
            assert len(store.index.handoff) == 0
            # an append without keys: the builder decompresses its batch itself
            own = _compressed("zstd", [b"own"])
            assert store.append("t", 0, own, offset_count=1, max_timestamp=1_000).status \
                is StoreStatus.OK
            await _indexed(store)
            assert body_format.keys_calls == 1
            for codec, base in bases.items():
                for i in range(1, 40, 4):
                    key = b"%s-%d" % (codec.encode(), i)
                    assert await store.lookup_key("t", key) == [(0, base)], key
            assert await store.lookup_key("t", b"own") == [(0, 160)]
        finally:
            await store.close()
    run(body())


def test_keys_that_do_not_fit_are_not_kept_and_the_builder_reads_them(tmp_path, run):
    async def body():
        store, body_format = await _open(tmp_path)
        try:
            store.index.handoff = KeyHandoff(max_entries=0)
            assert store.key_room == 0
            keys = [b"k%d" % i for i in range(10)]
            result = store.append("t", 0, _compressed("lz4", keys), offset_count=10,
                                  max_timestamp=1_000, keys=keys)  # offered all the same
            assert result.status is StoreStatus.OK
            assert len(store.index.handoff) == 0
            await _indexed(store)
            assert body_format.keys_calls == 1
            assert await store.lookup_key("t", b"k9") == [(0, 0)]
        finally:
            await store.close()
    run(body())


def test_no_keys_are_kept_while_the_index_is_off(tmp_path, run):
    async def body():
        store, _ = await _open(tmp_path, index_enable=False)
        try:
            assert store.key_room == 0
            result = store.append("t", 0, _compressed("gzip", [b"k"]), offset_count=1,
                                  max_timestamp=1_000, keys=[b"k"])
            assert result.status is StoreStatus.OK
            assert len(store.index.handoff) == 0
        finally:
            await store.close()
    run(body())


def test_an_undone_append_leaves_no_keys_for_the_entry_taking_its_place(tmp_path, run,
                                                                       monkeypatch):
    """The dispatch fails before the entry is visible to the builder: the append is undone,
    and the next entry at the same CommitLog position is indexed with its own keys."""
    original = Dispatcher.dispatch

    def dispatch(self, req, queue):
        if req.offset_count == 3:
            raise MemoryError
        original(self, req, queue)
    monkeypatch.setattr(Dispatcher, "dispatch", dispatch)

    async def body():
        store, body_format = await _open(tmp_path)
        try:
            position = store.commit_log.max_offset
            failed = store.append("t", 0, _compressed("zstd", [b"ghost"] * 3), offset_count=3,
                                  max_timestamp=1_000, keys=[b"ghost"] * 3)
            assert failed.status is StoreStatus.INTERNAL_ERROR
            assert len(store.index.handoff) == 0 and store.key_room > 0
            real = store.append("t", 0, _compressed("zstd", [b"real"]), offset_count=1,
                                max_timestamp=1_000)
            assert real.status is StoreStatus.OK and real.phy_offset == position
            await _indexed(store)
            assert body_format.keys_calls == 1  # read from the entry, not handed over
            assert store.index.query(b"t#ghost", 0, 2 ** 62, 10) == []
            assert store.index.query(b"t#real", 0, 2 ** 62, 10) == [position]
        finally:
            await store.close()
    run(body())


# ---- the handoff itself ------------------------------------------------------------------

def _cost(keys: list[bytes]) -> int:
    return sum(map(len, keys)) + KEY_OVERHEAD * len(keys)


def test_the_handoff_is_bounded_by_entries_and_bytes():
    keys = [b"abcd"] * 10
    handoff = KeyHandoff(max_entries=3, max_bytes=2 * _cost(keys))
    handoff.put(100, keys)
    assert handoff.room == _cost(keys)
    handoff.put(200, keys)
    assert handoff.room == 0
    handoff.put(300, [b"x"])  # over the bytes: not kept
    assert len(handoff) == 2
    assert handoff.take(200) == keys  # drops 100, walked past (skipped)
    assert len(handoff) == 0 and handoff.room == 2 * _cost(keys)
    for position in (1, 2, 3, 4):
        handoff.put(position, [])
    assert len(handoff) == 3 and handoff.room == 0  # the entry bound
    assert handoff.take(3) == [] and handoff.take(3) is None


def test_dropping_from_a_position_frees_it_and_those_after():
    handoff = KeyHandoff()
    for position in (10, 20, 30):
        handoff.put(position, [b"k%d" % position])
    room = handoff.room
    handoff.drop_from(20)
    assert len(handoff) == 1 and handoff.room == room + 2 * _cost([b"k20"])
    handoff.put(20, [b"new"])
    assert handoff.take(20) == [b"new"]

