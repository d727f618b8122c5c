"""A drain makes every ConsumeQueue file its pending units reach before its first write runs
(ConsumeQueue.pending_writes, for ConsumeQueue.drain and the QueueWriter alike). A crash
between the two leaves the next file empty while the file before it lacks its last units.
The start must end the queue where its units stop, not at the empty file's start: there, replay
took the missing units' batches for present (they lay below the queue's end) and left their
offsets empty, so acknowledged batches could no longer be read ("no batch at 15819 below the
log end 16213" after a SIGKILL of the crash writer).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from commitgate.engine.consume_queue_store import ConsumeQueueStore
from commitgate.engine.file_handle_cache import FileHandleCache
from commitgate.engine.paths import StorePaths
from tests.engine.crash_writer import CQ_ENTRIES_PER_FILE
from tests.engine.test_crash_recovery import (
    KILLED,
    Ack,
    Key,
    append_acked,
    open_with_topic,
    record_acks,
    recovered_and_appendable,
    run_crash_child,
)


def _store(tmp_path: Path, per_file: int) -> ConsumeQueueStore:
    return ConsumeQueueStore(StorePaths(tmp_path), per_file, FileHandleCache(16))


def _crash_after_making_files(store: ConsumeQueueStore) -> None:
    """What a SIGKILL between a drain's preparation and its writes leaves: the files its units
    reach exist, none of its units are written (the pending ones die with the process)."""
    queue = store.get("t", 0)
    writes = queue.pending_writes()
    assert len(writes) > 1, "the pending units must reach a file that did not exist"
    store.handles.close_all()  # descriptors only: nothing of the drain was written


def _files(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in StorePaths(tmp_path).consumequeue_dir("t", 0).iterdir())


def test_a_start_ends_the_queue_where_its_units_stop_not_at_an_empty_next_file(tmp_path):
    store = _store(tmp_path, per_file=10)
    queue = store.get("t", 0)
    queue.put(0, 8, phy=0, size=10, timestamp=1)
    queue.drain()
    queue.put(8, 5, phy=10, size=10, timestamp=2)  # offsets 8..12: into file 1
    _crash_after_making_files(store)
    assert len(_files(tmp_path)) == 2  # file 1 made, empty; file 0 without units 8 and 9

    reopened = _store(tmp_path, per_file=10).get("t", 0)
    assert (reopened.min_offset, reopened.max_offset) == (0, 8)
    assert reopened.file_indexes == [0] and len(_files(tmp_path)) == 1
    assert reopened.get(7) == (0, 10, 1)
    assert reopened.max_phy_end == 10
    # replay gives the lost batch its units again, at the offsets it had
    reopened.put(8, 5, phy=10, size=10, timestamp=2)
    reopened.drain()
    assert [reopened.get(o) for o in range(8, 13)] == [(10, 10, 2)] * 5
    again = _store(tmp_path, per_file=10).get("t", 0)
    assert again.max_offset == 13 and again.get(12) == (10, 10, 2)


def test_a_start_steps_back_over_several_empty_files(tmp_path):
    store = _store(tmp_path, per_file=4)
    queue = store.get("t", 0)
    queue.put(0, 5, phy=0, size=10, timestamp=1)
    queue.drain()
    queue.put(5, 9, phy=10, size=10, timestamp=2)  # offsets 5..13: files 1, 2 and 3
    _crash_after_making_files(store)
    assert len(_files(tmp_path)) == 4

    reopened = _store(tmp_path, per_file=4).get("t", 0)
    assert reopened.max_offset == 5 and reopened.file_indexes == [0, 1]
    assert reopened.get(4) == (0, 10, 1)


def test_a_start_keeps_the_end_when_the_file_before_an_empty_one_is_whole(tmp_path):
    """A crash between a drain's two writes: the first file is whole, so the end is right and
    replay rewrites the batch cut between the files (Dispatcher._torn)."""
    store = _store(tmp_path, per_file=10)
    queue = store.get("t", 0)
    queue.put(0, 8, phy=0, size=10, timestamp=1)
    queue.put(8, 5, phy=10, size=10, timestamp=2)
    writes = queue.pending_writes()
    writes[0].run()  # file 0's units; file 1 made, not written
    assert writes[0].error is None
    store.handles.close_all()

    reopened = _store(tmp_path, per_file=10).get("t", 0)
    assert reopened.max_offset == 10 and reopened.file_indexes == [0, 1]
    assert reopened.get(9) == (10, 10, 2)


# ---- the same through a SIGKILLed store ---------------------------------------------------
# A child process appends acknowledged batches and dies (os._exit, which leaves the files as a
# SIGKILL would) right after a drain made ConsumeQueue file 1 and before it wrote anything.


def _die_after_making_file_1() -> None:
    from commitgate.engine.consume_queue import ConsumeQueue

    get_file = ConsumeQueue._file

    def file_then_die(self: ConsumeQueue, index: int, create: bool = False):
        mapped = get_file(self, index, create)
        if create and index == 1:
            os._exit(KILLED)
        return mapped

    ConsumeQueue._file = file_then_die


def drain_dies_in_thorough_round(data_dir: str) -> None:
    """Child: partition 0 acknowledged up to 1005, the last units pending; the store-wide drain
    (the thorough round's, through the QueueWriter) makes file 1 and dies."""
    async def main() -> None:
        store = await open_with_topic(Path(data_dir))
        for _ in range((CQ_ENTRIES_PER_FILE + 5) // 5):
            await append_acked(store, 0, 5)
        _die_after_making_file_1()
        store.queues.drain()

    asyncio.run(main())


def drain_dies_at_pending_limit(data_dir: str) -> None:
    """Child: partition 0 takes acknowledged batches until the append whose units fill the
    pending buffer across into file 1 drains it (ConsumeQueue.drain) and dies there."""
    async def main() -> None:
        store = await open_with_topic(Path(data_dir))
        _die_after_making_file_1()
        while True:
            await append_acked(store, 0, 5)

    asyncio.run(main())


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("child", "unacknowledged"), [
    ("drain_dies_in_thorough_round", 0),
    # the append that died in its drain wrote its CommitLog entry: recovery keeps that batch
    ("drain_dies_at_pending_limit", 5),
])
def test_sigkill_after_a_drain_made_the_next_file_loses_no_acknowledged_batch(
        tmp_path, child, unacknowledged):
    data_dir = tmp_path / "data"
    output = run_crash_child(child, data_dir, __name__)
    acked: dict[Key, Ack] = {}
    record_acks(acked, output.acks)
    top = max(ack.end for ack in acked.values())
    assert top > CQ_ENTRIES_PER_FILE - 5, top
    queue_dir = StorePaths(data_dir).consumequeue_dir("crash", 0)
    assert len(list(queue_dir.iterdir())) == 2  # file 1 made, and nothing written to it

    state = recovered_and_appendable(data_dir, acked)
    assert state.ends[0] == top + unacknowledged, state.ends
