"""Size-prefixed Kafka frames read straight from the socket into buffers we own.

Small requests land in a reusable receive buffer and are copied out once, into a bytearray of
their own (handlers keep them, and Produce patches batches inside them in place). A large
request gets its own bytearray as soon as its size prefix is known, and the socket reads
straight into it: the record bytes of a big produce are copied by the kernel only.
"""
from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
RECEIVE_BUFFER = 256 * 1024
DIRECT_FRAME = 64 * 1024  # frames at least this big are read straight into their own buffer


class FrameError(ValueError):
    """A size prefix that is negative or above the limit: the connection must close."""


class FrameReader:
    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self._buf = bytearray(RECEIVE_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # first unparsed byte
        self._end = 0  # end of received bytes
        self._frame: bytearray | None = None  # a large frame being filled directly
        self._filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """Account for ``nbytes`` received; returns the frames now complete, in order."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._end += nbytes
        return self._parse()

    def _parse(self) -> list[bytearray]:
        frames = []
        buf = self._buf
        while self._end - self._start >= 4:
            (size,) = SIZE.unpack_from(buf, self._start)
            if size < 0 or size > self.max_frame:
                raise FrameError(f"a frame of {size} bytes (the limit is {self.max_frame})")
            body = self._start + 4
            have = self._end - body
            if have >= size:
                frames.append(buf[body:body + size])
                self._start = body + size
                continue
            if size >= DIRECT_FRAME or size > len(buf) - 4:
                self._frame = bytearray(size)
                self._frame[:have] = self._view[body:self._end]
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
