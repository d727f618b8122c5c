"""FrameReader: frames of any size, split across reads at any point, come out whole; each is
charged to the request memory from its size prefix until released, and a reader waits (holding
what it received) while that memory is taken."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.gateway.frame_reader import DIRECT_FRAME, RECEIVE_BUFFER, FrameError, FrameReader
from commitgate.gateway.request_memory import RequestMemory


def _reader(max_frame: int = 1 << 20, budget: int = -1) -> FrameReader:
    return FrameReader(max_frame, RequestMemory(budget))


def _feed(reader: FrameReader, data: bytes, cuts: list[int], keep: bool = False) -> list:
    """Deliver ``data`` as the socket would: into reader-owned buffers, in pieces. Frames come
    back as bytes (or as the reader's own views with ``keep``)."""
    frames, pos, cut_iter = [], 0, iter(cuts)
    while pos < len(data):
        target = reader.get_buffer()
        assert len(target) > 0
        n = min(len(target), len(data) - pos, next(cut_iter, len(data)) or 1)
        target[:n] = data[pos:pos + n]
        pos += n
        frames += [f if keep else bytes(f) for f in reader.buffer_updated(n)]
    return frames


sizes = st.one_of(st.integers(0, 300), st.integers(DIRECT_FRAME - 2, DIRECT_FRAME + 2),
                  st.integers(RECEIVE_BUFFER - 10, RECEIVE_BUFFER + 10))


@settings(max_examples=60, deadline=None)
@given(st.lists(sizes, min_size=1, max_size=6), st.lists(st.integers(1, 100_000), max_size=50))
def test_frames_survive_any_split(frame_sizes, cuts):
    bodies = [bytes([i % 256]) * n for i, n in enumerate(frame_sizes)]
    data = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    reader = _reader()
    assert _feed(reader, data, cuts) == bodies


def test_frames_are_writable_and_independent_of_the_receive_buffer():
    reader = _reader()
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 3) + b"def"
    target = reader.get_buffer()
    target[:len(data)] = data
    first, second = reader.buffer_updated(len(data))
    assert isinstance(first, memoryview) and not first.readonly
    assert (bytes(first), bytes(second)) == (b"abc", b"def")
    first[0] = ord("z")
    assert bytes(second) == b"def"
    assert reader.get_buffer()[:3] != b"zbc"  # the receive buffer was not aliased


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1])
def test_bad_sizes_raise(size):
    reader = _reader()
    target = reader.get_buffer()
    target[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError):
        reader.buffer_updated(4)


def test_large_frame_buffers_are_reused_after_release():
    reader = _reader(1 << 22)
    body = b"q" * (DIRECT_FRAME * 2)
    [first] = _feed(reader, struct.pack(">i", len(body)) + body, [], keep=True)
    assert bytes(first) == body
    reader.release(first)
    [second] = _feed(reader, struct.pack(">i", len(body)) + b"r" * len(body), [], keep=True)
    assert second.obj is first.obj  # the pooled buffer came back
    assert bytes(second) == b"r" * len(body)


def _framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def test_a_frame_is_charged_from_its_size_prefix_until_released():
    reader = _reader(budget=1 << 30)
    size = DIRECT_FRAME * 4
    assert _feed(reader, struct.pack(">i", size), []) == []
    assert reader.memory.used == size and reader.receiving
    [frame] = _feed(reader, b"x" * size, [], keep=True)
    assert reader.memory.used == size and not reader.receiving
    reader.release(frame)
    assert reader.memory.used == 0


def test_a_closed_connection_gives_back_the_frame_it_was_receiving():
    reader = _reader(budget=1 << 30)
    _feed(reader, struct.pack(">i", 1000) + b"partial", [])
    assert reader.memory.used == 1000
    reader.close()
    assert reader.memory.used == 0


def test_reading_waits_while_the_budget_is_taken_and_goes_on_when_it_is_given_back():
    reader = _reader(budget=100)
    bodies = [b"a" * 80, b"b" * 80, b"c" * 80, b"d" * 5]
    first, second = _feed(reader, _framed(*bodies), [], keep=True)
    # non-strict as Kafka's pool: the second frame came while 20 bytes were left
    assert (bytes(first), bytes(second)) == (bodies[0], bodies[1])
    assert reader.waiting == 80 and reader.memory.used == 160
    assert not reader.memory.try_take(1)
    granted: list[memoryview] = []
    reader.memory.wait(lambda: granted.extend(reader.granted()))
    reader.release(first)  # 80 of 100 used: the third goes, the fourth waits again
    assert [bytes(f) for f in granted] == [bodies[2]] and reader.waiting == 5
    reader.memory.wait(lambda: granted.extend(reader.granted()))
    reader.release(second)
    assert [bytes(f) for f in granted] == bodies[2:]
    assert reader.waiting == 0 and reader.memory.used == 85


def test_a_frame_larger_than_the_whole_budget_proceeds_when_nothing_else_holds_memory():
    reader = _reader(budget=10)
    body = b"z" * (DIRECT_FRAME * 2)
    [frame] = _feed(reader, _framed(body), [], keep=True)
    assert bytes(frame) == body
    reader.release(frame)
    assert reader.memory.used == 0
