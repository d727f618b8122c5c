"""Size-prefixed Kafka frames read from the socket into buffers allocated as bytes arrive.

Every connection reads into one receive buffer shared by the whole event loop: asyncio asks a
protocol for a buffer and reports the bytes received into it at once, for one connection at a
time. Frames complete in that buffer are copied out, each into a bytearray of its own (handlers
keep them, and Produce patches batches inside them in place). A frame that is not complete gets
its own buffer as soon as its size prefix is known, and the socket reads the rest straight into
it: the record bytes of a big produce are copied by the kernel only. An idle connection holds
at most the 3 bytes of a split size prefix.

Large frames live in anonymous mmaps: the kernel maps zero pages as they are first written, so
a size prefix alone costs no memory until the body arrives, and a closed mmap goes back to the
system at once. Freed ones are pooled: a fresh mmap costs a page fault per 4 KiB written, more
than the kernel's copy of the data itself. Each frame is charged to the broker's request memory
(``queued.max.request.bytes``) from its size prefix until its response is written; while the
budget is taken the reader holds the bytes after the prefix and stops (``waiting``).
"""
from __future__ import annotations

import mmap
import struct

from commitgate.gateway.request_memory import RequestMemory

SIZE = struct.Struct(">i")
RECEIVE_BUFFER = 256 * 1024
DIRECT_FRAME = 64 * 1024  # frames at least this big get an mmap (and a pooled one if free)

POOL_BYTES = 64 << 20  # large request buffers kept for reuse, across all connections
POOL_PER_CLASS = 8


class BufferPool:
    """Large buffers by power-of-two capacity; one event loop uses it, so no locking."""

    def __init__(self, limit: int = POOL_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self._free: dict[int, list[mmap.mmap]] = {}

    def take(self, size: int) -> memoryview:
        capacity = 1 << (size - 1).bit_length()
        free = self._free.get(capacity)
        if free:
            self.held -= capacity
            return memoryview(free.pop())[:size]
        return memoryview(mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE))[:size]

    def give(self, frame: memoryview) -> None:
        """Take back a frame from ``take`` once nothing reads it any more."""
        buf = frame.obj
        capacity = len(buf)
        free = self._free.setdefault(capacity, [])
        if len(free) < POOL_PER_CLASS and self.held + capacity <= self.limit:
            free.append(buf)
            self.held += capacity


POOL = BufferPool()
_RECEIVED = memoryview(bytearray(RECEIVE_BUFFER))  # the event loop's one receive buffer


class FrameError(ValueError):
    """A size prefix that is negative or above the limit: the connection must close."""


class FrameReader:
    def __init__(self, max_frame: int, memory: RequestMemory) -> None:
        self.max_frame = max_frame
        self.memory = memory
        self.waiting = 0  # size of a frame whose charge the budget refused, until granted
        self._held = b""  # the bytes received after that frame's size prefix
        self._prefix = b""  # a size prefix split across reads
        self._frame: memoryview | None = None  # a frame being filled straight from the socket
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return self._frame[self._filled:]
        return _RECEIVED

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """Account for ``nbytes`` received; returns the frames now complete, in order. Hand
        each back to ``release`` once its response is written."""
        if self._frame is None:
            return self._parse(_RECEIVED[:nbytes])
        self._filled += nbytes
        if self._filled < len(self._frame):
            return []
        frame, self._frame = self._frame, None
        return [frame]

    def granted(self) -> list[memoryview]:
        """The budget has room again: charge the waiting frame and go on with the held bytes."""
        size, held = self.waiting, memoryview(self._held)
        self.waiting, self._held = 0, b""
        self.memory.take(size)
        frames: list[memoryview] = []
        pos = self._begin(size, held, 0, frames)
        if self._frame is None:
            frames += self._parse(held[pos:])
        return frames

    def release(self, frame: memoryview) -> None:
        self.memory.give(len(frame))
        if len(frame) >= DIRECT_FRAME:
            POOL.give(frame)

    def close(self) -> None:
        """Give back the charge of a frame still being received (the connection closed)."""
        frame, self._frame = self._frame, None
        if frame is not None:
            self.release(frame)
        self.waiting, self._held = 0, b""

    @property
    def receiving(self) -> bool:
        """A frame's size is known and its body is still arriving or waiting for memory."""
        return self._frame is not None or self.waiting > 0

    def _parse(self, data: memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        pos = 0
        if self._prefix:
            pos = 4 - len(self._prefix)
            self._prefix += bytes(data[:pos])
            if len(self._prefix) < 4:
                return frames
            (size,) = SIZE.unpack(self._prefix)
            self._prefix = b""
            pos = self._start(size, data, pos, frames)
        while self._frame is None and not self.waiting and len(data) - pos >= 4:
            (size,) = SIZE.unpack_from(data, pos)
            pos = self._start(size, data, pos + 4, frames)
        if self._frame is None and not self.waiting and pos < len(data):
            self._prefix = bytes(data[pos:])
        return frames

    def _start(self, size: int, data: memoryview, pos: int, frames: list[memoryview]) -> int:
        """A size prefix was read: check it, charge it (or wait) and take the body at ``pos``."""
        if size < 0 or size > self.max_frame:
            raise FrameError(f"a frame of {size} bytes (the limit is {self.max_frame})")
        if not self.memory.try_take(size):
            self.waiting, self._held = size, bytes(data[pos:])
            return len(data)
        return self._begin(size, data, pos, frames)

    def _begin(self, size: int, data: memoryview, pos: int, frames: list[memoryview]) -> int:
        """Take the body of a charged frame from ``data[pos:]``; returns the position after."""
        have = min(len(data) - pos, size)
        if have == size and size < DIRECT_FRAME:
            frames.append(memoryview(bytearray(data[pos:pos + size])))
            return pos + size
        frame = POOL.take(size) if size >= DIRECT_FRAME else memoryview(bytearray(size))
        frame[:have] = data[pos:pos + have]
        if have == size:
            frames.append(frame)
        else:
            self._frame, self._filled = frame, have
        return pos + have
