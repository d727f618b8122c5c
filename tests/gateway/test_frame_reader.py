"""FrameReader: frames of any size, split across reads at any point, come out whole."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.frame_reader import DIRECT_FRAME, RECEIVE_BUFFER, FrameError, FrameReader


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
    reader = FrameReader(max_frame=1 << 20)
    assert _feed(reader, data, cuts) == bodies


def test_frames_are_writable_and_independent_of_the_receive_buffer():
    reader = FrameReader(max_frame=1 << 20)
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
    reader = FrameReader(max_frame=1 << 20)
    target = reader.get_buffer()
    target[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError):
        reader.buffer_updated(4)


def test_large_frame_buffers_are_reused_after_release():
    reader = FrameReader(max_frame=1 << 22)
    body = b"q" * (DIRECT_FRAME * 2)
    [first] = _feed(reader, struct.pack(">i", len(body)) + body, [], keep=True)
    assert bytes(first) == body
    reader.release(first)
    [second] = _feed(reader, struct.pack(">i", len(body)) + b"r" * len(body), [], keep=True)
    assert second.obj is first.obj  # the pooled buffer came back
    assert bytes(second) == b"r" * len(body)
