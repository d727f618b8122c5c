"""A crash between the ConsumeQueue files of one pointing (docs/architecture.md, "Replay and
rebuild"): ``ConsumeQueue.point_at`` writes a range of units one file at a time, so a SIGKILL
between two of those writes leaves a batch (or a run of removed offsets) whose units straddle
a file boundary pointing partly at the new entry and partly at the old one. Recovery must
make each such batch's units point at one entry again: otherwise a fetch there returns
records the view from the log start skips, and the cleaner, which judges an entry by its
batch's first unit, deletes the old entry while units still point at it.

The crash is made by ``run_crash_child``: the child's ``point_at`` writes the first file of a
range crossing a file boundary, then ``os._exit``s (what a SIGKILL between the two pwrites
leaves: the page cache keeps the first write).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from commitgate.engine import MessageStore
from commitgate.engine.consume_queue import ConsumeQueue
from tests.engine.conftest import open_store
from tests.engine.test_compaction import KEEP_TOMBSTONES, _expected, _produce, _read_all
from tests.engine.test_copy_replay import SMALL_SEGMENTS, _fill
from tests.engine.test_crash_recovery import KILLED, run_crash_child

PER_FILE = 4  # units per ConsumeQueue file: the batches below cross the boundary at 4
CONFIG = {**SMALL_SEGMENTS, "consumequeue_entries_per_file": PER_FILE}

# offsets 0 | 1 | 2..5 (crosses 4) | 6 | 7: a cleaning rewrites the batch at 2 (c@4 is
# superseded by c@6) and drops the batch at 0 (a@0 by a@2)
REWRITTEN = [[(b"a", b"1")], [(b"z", b"1")],
             [(b"a", b"2"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")],
             [(b"c", b"2")], [(b"t", b"1")]]
# offsets 0 | 1 | 2..5 (crosses 4) | 6 | 7: a cleaning drops the batch at 2 (every key comes
# again at 6), so offsets 2..5 point at the batch at 6
DROPPED = [[(b"a", b"1")], [(b"z", b"1")],
           [(b"b", b"1"), (b"c", b"1"), (b"d", b"1"), (b"e", b"1")],
           [(b"b", b"2"), (b"c", b"2"), (b"d", b"2"), (b"e", b"2")], [(b"t", b"1")]]
# offsets 0 | 1 | 2..5 (crosses 4) | 6, of a topic that is not compacted: the cleaner
# relocates them all (the filler after them is deleted) and repoints the batch at 2 last
RELOCATED = [[(b"a", b"1")], [(b"z", b"1")],
             [(b"b", b"1"), (b"c", b"1"), (b"d", b"1"), (b"e", b"1")], [(b"t", b"1")]]
SCENARIOS = {"rewritten": REWRITTEN, "dropped": DROPPED, "relocated": RELOCATED}
COMPACTED = {"rewritten", "dropped"}


def _die_between_files() -> None:
    """Make ``point_at`` die after the first file of a range that crosses a file boundary."""
    point_at = ConsumeQueue.point_at

    def torn(queue: ConsumeQueue, lo: int, hi: int, phy: int, size: int):
        boundary = (lo // queue.entries_per_file + 1) * queue.entries_per_file
        if hi > boundary:
            point_at(queue, lo, boundary, phy, size)
            os._exit(KILLED)
        return point_at(queue, lo, hi, phy, size)

    ConsumeQueue.point_at = torn


def crash_in_a_torn_pointing(tmp_path: str, scenario: str) -> None:
    """Child: produce the scenario's batches, then clean (a relocation: after the filler's
    deletion); die inside the pointing."""
    async def main() -> None:
        async with open_store(Path(tmp_path), **CONFIG) as store:
            store.create_topic("c", 1, _topic_configs(scenario))
            _produce(store, "c", SCENARIOS[scenario])
            if scenario not in COMPACTED:
                _delete_filler(store)
            _die_between_files()
            await store.retention.run_once()
            raise AssertionError("the cleaning pointed no range across a file boundary")

    asyncio.run(main())


def crash_rewritten(tmp_path: str) -> None:
    crash_in_a_torn_pointing(tmp_path, "rewritten")


def crash_dropped(tmp_path: str) -> None:
    crash_in_a_torn_pointing(tmp_path, "dropped")


def crash_relocated(tmp_path: str) -> None:
    crash_in_a_torn_pointing(tmp_path, "relocated")


def _topic_configs(scenario: str) -> dict[str, str]:
    return dict(KEEP_TOMBSTONES) if scenario in COMPACTED else {"retention.ms": "-1"}


def _delete_filler(store: MessageStore) -> None:
    """Fill the first segment with records of ``filler`` and delete them: the next pass
    relocates what else the segment holds and deletes it."""
    if "filler" not in store.table.topics:
        store.create_topic("filler", 1, {"retention.ms": "-1"})
    _fill(store, 60)
    store.delete_records("filler", 0, -1)


def _model(scenario: str) -> dict[int, tuple[bytes, bytes]]:
    """Every record the child produced, by offset (a fresh partition numbers from 0)."""
    records = [record for batch in SCENARIOS[scenario] for record in batch]
    return dict(enumerate(records))


def assert_reads_continue(store: MessageStore) -> None:
    """A fetch at any offset starts with the record the view from the log start has next."""
    view = _read_all(store, "c")
    for offset in range(store.log_end_offset("c", 0)):
        following = [record for record in view if record[0] >= offset][:1]
        assert _read_all(store, "c", offset)[:1] == following, \
            f"a read at {offset} does not continue the view from the log start {view}"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_recovery_mends_a_pointing_torn_between_queue_files(tmp_path, run, scenario):
    """Offsets 2 and 3 point at the new entry, 4 and 5 at the old one: a read at 4 returned
    the old batch's records, the view from the log start the new entry's (what
    test_compaction_crash saw once), and the old entry counted as dead."""
    run_crash_child(f"crash_{scenario}", tmp_path, __name__)

    async def body() -> None:
        async with open_store(tmp_path, **CONFIG) as store:
            queue = store.queues.get("c", 0)
            heads = [queue.get(offset)[:2] for offset in range(2, 6)]
            assert len(set(heads)) == 1, f"the units of offsets 2..5 point at {heads}"
            assert_reads_continue(store)
            # the old entries' segment goes: every unit must point at an entry still there
            first_segment_end = store.commit_log.queue.files[0].end_offset
            _delete_filler(store)
            for _ in range(3):
                await store.retention.run_once()
            assert store.commit_log.min_offset >= first_segment_end, \
                "the originals' segment is still there"
            assert_reads_continue(store)
            model = _model(scenario)
            expected = _expected(model) if scenario in COMPACTED else \
                [(offset, *record) for offset, record in sorted(model.items())]
            assert _read_all(store, "c") == expected
    run(body())
