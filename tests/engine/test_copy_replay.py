"""Start-up replay and rebuild of the copies the CommitLog cleaner and the compactor append
(docs/architecture.md, "Replay and rebuild"): replay redoes exactly the repoint a crash cut
short (a copy's units move only while they still point at the copy's source, the offsets
compaction pointed at that source with them), writes a copy's units only where none exist,
and fills offsets left without a batch only once every copy was met.

Each test is a scenario that went wrong before: a crash brought back records a cleaning had
removed, a crash during a relocation left the log start pointing at a deleted entry, and a
rebuild made reads from the log start skip a batch. The crashes are made where the scenario
needs them by ``run_crash_child`` (a child process that ``os._exit``s at the chosen point,
which leaves the files as a SIGKILL there would).
"""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from commitgate.engine import MessageStore
from commitgate.engine.commit_log import RELOCATED
from tests.engine.conftest import open_store
from tests.engine.test_compaction import KEEP_TOMBSTONES, _produce, _read_all
from tests.engine.test_crash_recovery import KILLED, run_crash_child

# no retention pass and no thorough ConsumeQueue round but the test's own: recovery replays
# everything since the topics were made, whatever the machine's speed
QUIET = {"retention_check_interval_ms": 3_600_000,
         "consumequeue_flush_thorough_interval_ms": 3_600_000}
# 16 KiB segments: a few filler records make the oldest segment worth relocating
SMALL_SEGMENTS = {**QUIET, "commitlog_segment_bytes": 16 * 1024}


def _copies(store: MessageStore, topic: str) -> dict[int, int]:
    """Base offset -> CommitLog offset of the last copy of each batch of ``topic``-0."""
    return {req.queue_offset: req.phy_offset
            for req in store.commit_log.iter_entries(store.commit_log.min_offset,
                                                     check_crc=False)
            if req.topic == topic and req.sys_flag & RELOCATED}


def _fill(store: MessageStore, records: int) -> None:
    """``records`` records of 1,000 bytes to topic ``filler``."""
    _produce(store, "filler", [[(None, b"f" * 1_000)] for _ in range(records)])


# ---- a crash after a cleaning that dropped a copy's records ---------------------------------

RESURRECTION_VIEW = [(2, b"d", b"x"), (3, b"b", b"v2"), (4, b"z", b"1"), (5, b"a", None),
                     (6, b"y", b"1")]


def crash_after_a_cleaning_dropped_a_copy(tmp_path: str) -> None:
    """Child: the first cleaning rewrites the batch at 0 as a copy holding only a=v1; the
    second drops that copy (a's tombstone came), so offsets 0 and 1 point at the batch at 2,
    whose original entry is older than the copy; then die."""
    async def main() -> None:
        async with open_store(Path(tmp_path), **QUIET) as store:
            store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
            _produce(store, "c", [[(b"a", b"v1"), (b"b", b"v1")], [(b"d", b"x")],
                                  [(b"b", b"v2")], [(b"z", b"1")]])
            await store.retention.run_once()
            assert 0 in _copies(store, "c"), "the first cleaning made no copy of the batch at 0"
            _produce(store, "c", [[(b"a", None)], [(b"y", b"1")]])
            await store.retention.run_once()
            assert _read_all(store, "c") == RESURRECTION_VIEW
            queue = store.queues.get("c", 0)
            assert queue.get(0)[0] == queue.get(2)[0] < _copies(store, "c")[0]
            os._exit(KILLED)

    asyncio.run(main())


def test_replay_after_a_crash_does_not_bring_back_what_a_cleaning_removed(tmp_path, run):
    """The copy met by replay is not the newer state of its offsets: they point at the next
    batch kept, an entry older than the copy. Rewriting them brought a=v1 back below the
    cleaned offsets, where no cleaning looks again: once a's tombstone expired, a deleted key
    read v1 again."""
    run_crash_child("crash_after_a_cleaning_dropped_a_copy", tmp_path, __name__)

    async def body() -> None:
        async with open_store(tmp_path, **QUIET) as store:
            queue = store.queues.get("c", 0)
            assert 0 in _copies(store, "c")  # still in the CommitLog: replay met it
            kept = queue.get(2)[0]  # the original entry of d@2, the next batch kept
            assert [queue.get(offset)[0] for offset in range(3)] == [kept] * 3, \
                "replay pointed the offsets a cleaning had removed back at the dropped copy"
            assert _read_all(store, "c") == RESURRECTION_VIEW
            store.alter_topic_configs("c", {"delete.retention.ms": "0"})  # the tombstone expires
            _produce(store, "c", [[(b"w", b"1")], [(b"x", b"1")]])
            for _ in range(3):
                await store.retention.run_once()
            assert _read_all(store, "c") == [(2, b"d", b"x"), (3, b"b", b"v2"), (4, b"z", b"1"),
                                             (6, b"y", b"1"), (7, b"w", b"1"), (8, b"x", b"1")]
    run(body())


# ---- a crash between a relocation's copies and their repoint --------------------------------


def crash_before_a_relocation_repoints(tmp_path: str) -> None:
    """Child: a cleaning drops a=1 at 0, whose offset then points at b's batch at 1; the
    filler is deleted, so the cleaner relocates the first segment; die after the copies of
    the batches at 1, 2 and 3 were appended, before their units are repointed."""
    async def main() -> None:
        async with open_store(Path(tmp_path), **SMALL_SEGMENTS) as store:
            store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
            store.create_topic("filler", 1, {"retention.ms": "-1"})
            _produce(store, "c", [[(b"a", b"1")], [(b"b", b"1")], [(b"a", b"2")], [(b"z", b"1")]])
            await store.retention.run_once()
            queue = store.queues.get("c", 0)
            assert queue.get(0)[0] == queue.get(1)[0], "offset 0 is not pointed at the batch at 1"
            _fill(store, 60)
            store.delete_records("filler", 0, -1)

            async def die(chunk, touched) -> bool:
                os._exit(KILLED)

            store.retention.cleaner._commit = die
            await store.retention.run_once()
            raise AssertionError("the cleaner relocated nothing")

    asyncio.run(main())


def test_replay_redoes_a_cut_short_relocation_with_the_offsets_pointed_at_its_source(tmp_path,
                                                                                       run):
    """Offset 0 (the log start, a batch compaction removed) points at the entry of the batch
    at 1, like offset 1. Replay moved offset 1 to the copy and left offset 0 at the original,
    which looks dead to the cleaner (it checks the batch's own first offset): the next pass
    deleted its segment and reads from the log start returned nothing below the log end."""
    run_crash_child("crash_before_a_relocation_repoints", tmp_path, __name__)

    async def body() -> None:
        async with open_store(tmp_path, **SMALL_SEGMENTS) as store:
            copies = _copies(store, "c")
            assert sorted(copies) == [1, 2, 3]
            queue = store.queues.get("c", 0)
            assert [queue.get(offset)[0] for offset in range(4)] == \
                [copies[1], copies[1], copies[2], copies[3]]
            for _ in range(3):
                await store.retention.run_once()
            assert store.commit_log.min_offset > 0, "the originals' segment is still there"
            assert (store.log_start_offset("c", 0), store.log_end_offset("c", 0)) == (0, 4)
            assert _read_all(store, "c") == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"z", b"1")]
    run(body())


# ---- a rebuild that meets copies out of offset order ----------------------------------------


async def _build_copies_out_of_order(store: MessageStore) -> dict:
    """A compacted partition whose entries left after the first segment went are copies met
    out of offset order: the copy of the batch at 5 comes before the copy of the batch at 3,
    whose offsets 2..4 (2: a batch compaction dropped) hold key e's only record, e@4.
    Returns the model (every record produced, by offset)."""
    store.create_topic("c", 1, dict(KEEP_TOMBSTONES))
    store.create_topic("filler", 1, {"retention.ms": "-1"})
    model = _produce(store, "c", [
        [(b"a", b"1"), (b"a2", b"1")], [(b"d", b"1")], [(b"b", b"1"), (b"e", b"1")],
        [(b"c", b"1"), (b"f", b"1"), (b"g", b"1")], [(b"t", b"1")],
        [(b"a2", b"2")], [(b"d", b"2")], [(b"c", b"2")], [(b"t2", b"1")]])
    while store.commit_log.max_offset < 16 * 1024 - 2048:  # the copies go to the next segment
        _fill(store, 1)
    _produce(store, "filler", [[(None, b"f" * 3_000)]])
    await store.retention.run_once()  # 0 -> a copy [a], 2 dropped, 5 -> a copy [f, g]
    model.update(_produce(store, "c", [[(b"f", b"2")], [(b"t3", b"1")]]))
    await store.retention.run_once()  # 5 -> a copy [g]
    model.update(_produce(store, "c", [[(b"b", b"2")], [(b"t4", b"1")]]))
    await store.retention.run_once()  # 3 -> a copy [e]: offsets 2..4 point at it
    store.delete_records("filler", 0, -1)
    await store.retention.run_once()  # relocates the first segment and deletes it
    assert store.commit_log.min_offset >= 16 * 1024, "the first segment is still there"
    order = [req.queue_offset for req in store.commit_log.iter_entries(
        store.commit_log.min_offset, check_crc=False) if req.topic == "c"]
    assert 5 in order and 3 in order and order.index(5) < order.index(3), order
    return model


def test_a_rebuild_meeting_copies_out_of_order_skips_no_batch(tmp_path, run):
    """Replay pointed offsets 2..7 at the first copy of the batch at 5 as it came after the
    queue's end, and the copy of the batch at 3, met later, left offset 2 there: a read from
    the log start went from 0 to 5 and skipped e@4, the last record of key e."""
    async def body() -> None:
        async with open_store(tmp_path, **SMALL_SEGMENTS) as store:
            model = await _build_copies_out_of_order(store)
            view = _read_all(store, "c")
            assert (4, b"e", b"1") in view
            directory = store.paths.consumequeue_dir("c", 0)
        shutil.rmtree(directory)
        async with open_store(tmp_path, **SMALL_SEGMENTS) as store:
            rebuilt = _read_all(store, "c")
            # a rebuild may bring back removed records whose entries still exist, each at its
            # own offset; it must lose none
            assert set(view) <= set(rebuilt), sorted(set(view) - set(rebuilt))
            assert all(model[offset] == (key, value) for offset, key, value in rebuilt)
            assert [offset for offset, _, _ in rebuilt] == sorted({o for o, _, _ in rebuilt})
            for offset in (2, 3, 4):
                assert _read_all(store, "c", offset)[0] == (4, b"e", b"1"), offset
            assert (store.log_start_offset("c", 0), store.log_end_offset("c", 0)) == \
                (0, max(model) + 1)
            await store.retention.run_once()  # the rebuilt partition is all dirty
            assert _read_all(store, "c") == view
    run(body())
