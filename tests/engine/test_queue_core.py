"""QueueCore in C (engine._queue_core) and in Python (engine.queue_core) behave alike: the same
offsets, pending units, drains and new buffers for any sequence of batches."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.engine import queue_core
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.queue_core import CQ_UNIT, UNIT_SIZE
from tests.c_and_python import c_helper, implementations

CORES = implementations("engine._queue_core", "QueueCore", queue_core.QueueCore)


@pytest.fixture(scope="module")
def c_core():
    return c_helper("engine._queue_core")


def _recording(core: type) -> type:
    """A queue over ``core`` whose files are a list of (first offset, units) writes."""

    class Recording(core):
        __slots__ = ("capacity", "written")

        def __init__(self, capacity: int, limit: int) -> None:
            self.min_offset = self.max_offset = self.pending_from = self.max_phy_end = 0
            self.last_tags = -1
            self.pending, self.pending_limit = bytearray(), limit
            self.capacity, self.written = capacity, []

        def drain(self) -> None:
            length = (self.max_offset - self.pending_from) * UNIT_SIZE
            if length:
                self.written.append((self.pending_from, bytes(self.pending[:length])))
            self.pending_from = self.max_offset

        def _start_pending(self, queue_offset: int) -> None:
            if not self.written:
                self.min_offset = queue_offset
            if not self.pending:
                self.pending = bytearray(self.capacity)

        def state(self) -> tuple:
            pending = bytes(self.pending[:(self.max_offset - self.pending_from) * UNIT_SIZE])
            return (self.min_offset, self.max_offset, self.pending_from, self.last_tags,
                    self.max_phy_end, len(self.pending), pending, self.written)

    return Recording


def test_the_consume_queue_uses_the_c_core_when_built(c_core) -> None:
    assert issubclass(ConsumeQueue, c_core.QueueCore)


batches = st.lists(st.tuples(
    st.sampled_from((0, 0, 0, 1, 2)),  # offsets skipped first (a replayed batch over a gap)
    st.integers(0, 30),  # records
    st.integers(1, 5000),  # CommitLog entry size
    st.integers(-1, 1 << 40)), max_size=40)  # max timestamp


@settings(max_examples=300, deadline=None)
@given(batches, st.integers(0, 200), st.integers(1, 400))
def test_c_and_python_cores_behave_alike(c_core, batches, capacity, limit) -> None:
    queues = [_recording(core)(capacity, limit) for core in (c_core.QueueCore,
                                                              queue_core.QueueCore)]
    phy = 0
    for skip, count, size, timestamp in batches:
        for queue in queues:
            queue.put(queue.max_offset + skip, count, phy, size, timestamp)
        phy += size
        assert queues[0].state() == queues[1].state()


@pytest.mark.parametrize("core", CORES)
def test_put_packs_one_unit_per_record_and_takes_names(core) -> None:
    queue = _recording(core)(100, 1000)
    queue.put(queue_offset=0, count=3, phy=1 << 40, size=70, timestamp=9)
    queue.put(3, 1, 2, size=5, timestamp=4)  # an older timestamp keeps the running max
    assert bytes(queue.pending[:4 * UNIT_SIZE]) == CQ_UNIT.pack(1 << 40, 70, 9) * 3 + \
        CQ_UNIT.pack(2, 5, 9)
    assert (queue.max_offset, queue.max_phy_end, queue.last_tags) == (4, 7, 9)


@pytest.mark.parametrize("core", CORES)
def test_put_refuses_a_negative_count(core) -> None:
    queue = _recording(core)(100, 1000)
    with pytest.raises(ValueError):
        queue.put(0, -1, 0, 10, 0)
    assert queue.max_offset == 0


def test_the_c_put_checks_its_arguments_and_the_buffer_type(c_core) -> None:
    queue = _recording(c_core.QueueCore)(100, 1000)
    with pytest.raises(TypeError):
        queue.put(0, 1, 0, 10)
    with pytest.raises(TypeError):
        queue.put(0, 1, 0, 10, 0, count=1)
    with pytest.raises(ValueError):
        queue.put(0, 1, 0, 1 << 31, 0)  # a size that does not fit the unit's 4 bytes
    queue.pending = b"not a bytearray"
    queue.capacity = 0
    with pytest.raises(TypeError):
        queue.put(0, 1, 0, 10, 0)
