"""Size-prefixed Kafka frames read straight from the socket into buffers we own.

Small requests land in a reusable receive buffer and are copied out once, into a bytearray of
their own (handlers keep them, and Produce patches batches inside them in place). A large
request gets a buffer of its own as soon as its size prefix is known, and the socket reads
straight into it: the record bytes of a big produce are copied by the kernel only. Large
buffers come from a pool and go back once the request is handled: a fresh 1 MiB bytearray
costs a zero-fill and 256 page faults, more than the kernel's copy of the data itself.
"""
from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
RECEIVE_BUFFER = 256 * 1024
DIRECT_FRAME = 64 * 1024  # frames at least this big are read straight into their own buffer


POOL_BYTES = 64 << 20  # large request buffers kept for reuse, across all connections
POOL_PER_CLASS = 8


class BufferPool:
    """Large buffers by power-of-two capacity; one event loop uses it, so no locking."""

    def __init__(self, limit: int = POOL_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self._free: dict[int, list[bytearray]] = {}

    def take(self, size: int) -> memoryview:
        capacity = 1 << (size - 1).bit_length()
        free = self._free.get(capacity)
        if free:
            self.held -= capacity
            return memoryview(free.pop())[:size]
        return memoryview(bytearray(capacity))[:size]

    def give(self, frame: memoryview) -> None:
        """Take back a frame from ``take`` once nothing reads it any more."""
        buf = frame.obj
        capacity = len(buf)
        free = self._free.setdefault(capacity, [])
        if len(free) < POOL_PER_CLASS and self.held + capacity <= self.limit:
            free.append(buf)
            self.held += capacity


POOL = BufferPool()


class FrameError(ValueError):
    """A size prefix that is negative or above the limit: the connection must close."""


class FrameReader:
    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self._buf = bytearray(RECEIVE_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte
        self._end = 0  # end of received bytes
        self._frame: memoryview | None = None  # a large frame being filled directly
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return self._frame[self._filled:]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """Account for ``nbytes`` received; returns the frames now complete, in order. Hand
        each back to ``release`` once its request is handled."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._end += nbytes
        return self._parse()

    @staticmethod
    def release(frame: memoryview) -> None:
        if len(frame) >= DIRECT_FRAME:
            POOL.give(frame)

    def _parse(self) -> list[memoryview]:
        frames = []
        buf = self._buf
        while self._end - self._start >= 4:
            (size,) = SIZE.unpack_from(buf, self._start)
            if size < 0 or size > self.max_frame:
                raise FrameError(f"a frame of {size} bytes (the limit is {self.max_frame})")
            body = self._start + 4
            have = self._end - body
            if have >= size and size < DIRECT_FRAME:
                frames.append(memoryview(buf[body:body + size]))
                self._start = body + size
                continue
            if size >= DIRECT_FRAME or size > len(buf) - 4:
                self._frame = POOL.take(size)
                have = min(have, size)
                self._frame[:have] = self._view[body:body + have]
                self._start = body + have
                if have == size:
                    frames.append(self._frame)
                    self._frame = None
                    continue
                self._filled = have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def _compact(self) -> None:
        """Move a partial small frame to the front of the receive buffer."""
        pending = self._end - self._start
        self._buf[:pending] = self._view[self._start:self._end]
        self._start, self._end = 0, pending
