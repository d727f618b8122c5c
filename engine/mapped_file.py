"""MappedFile: one fixed-size, pre-allocated file, appended with pwritev and read through mmap.

RocketMQ writes either into the mapping or into a transient buffer that is later "committed" to
the file channel. Here every append is one ``os.pwritev`` of the caller's buffers, so the
written and committed positions are the same: the data is in the page cache when the call
returns. Reasons (measured in docs/architecture.md): pwritev joins no buffers, releases the
GIL, and a full disk surfaces as ``OSError(ENOSPC)`` instead of a SIGBUS from a faulting
mapping. Reads are memoryview slices of a shared read-only mapping: no copies, and the page
cache makes appended bytes visible to them at once.
"""
from __future__ import annotations

import errno
import logging
import mmap
import os
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

PAGE_SIZE = mmap.PAGESIZE


TEMPORARY_SUFFIX = ".allocating"


class MappedFile:
    """A segment of ``size`` bytes whose name is its start offset in the queue's address space."""

    # Slots keep the fields in the object itself, not in a separate array: with 10,000
    # partitions the file an append touches has usually left the CPU cache, and every
    # object it must load is one more miss (and memory per idle partition).
    __slots__ = (
        "_fd",
        "_mm",
        "_reserved",
        "_view",
        "flushed_position",
        "path",
        "size",
        "start_offset",
        "wrote_position",
    )

    def __init__(
        self, path: Path, start_offset: int, size: int, *, create: bool, reserve: bool = True
    ) -> None:
        self.path = path
        self.start_offset = start_offset
        self.size = size
        self.wrote_position = 0  # bytes appended (in the page cache)
        self.flushed_position = 0  # bytes known to be on disk
        self._reserved = reserve
        self._fd = _open(path, size, create, reserve)
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None

    @property
    def committed_position(self) -> int:
        """Appends reach the file in the same syscall, so committed == wrote (see module doc)."""
        return self.wrote_position

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size

    @property
    def free_bytes(self) -> int:
        return self.size - self.wrote_position

    def fileno(self) -> int:
        """The descriptor, for a C writer that packs and writes in one call (CommitLog)."""
        return self._fd

    def append(self, buffers: Sequence[bytes | bytearray | memoryview], length: int) -> int:
        """Append ``length`` bytes made of ``buffers`` in one pwritev; returns the start position."""
        pos = self.wrote_position
        self.write_at(pos, buffers, length)
        self.wrote_position = pos + length
        return pos

    def write_at(self, pos: int, buffers: Sequence[bytes | bytearray | memoryview], length: int) -> None:
        """Write at an explicit position (the ConsumeQueue's slot for an offset)."""
        if pos + length > self.size:
            raise ValueError(f"{self.path}: write of {length} at {pos} passes the end {self.size}")
        done = os.pwritev(self._fd, buffers, pos)
        if done != length:  # a regular file writes short only when the disk is full
            raise OSError(errno.ENOSPC, f"{self.path}: wrote {done} of {length} bytes at {pos}")

    def read(self, pos: int, length: int) -> memoryview:
        """A zero-copy view of ``length`` bytes at ``pos``."""
        return self.view()[pos : pos + length]

    def pread(self, pos: int, length: int) -> bytes:
        """A copy of ``length`` bytes at ``pos``, without mapping the file: Python's mmap keeps
        a duplicate of the descriptor, so a mapped file costs two (ConsumeQueue files, of which
        10,000 partitions keep thousands open, read small units this way)."""
        return os.pread(self._fd, length, pos)

    def view(self) -> memoryview:
        if self._view is None:
            self._mm = mmap.mmap(self._fd, self.size, prot=mmap.PROT_READ)
            self._view = memoryview(self._mm)
        return self._view

    def flush(self) -> int:
        """fdatasync what was written; safe from a worker thread. Returns the new flushed position."""
        target, fd = self.wrote_position, self._fd
        if target > self.flushed_position and fd >= 0:  # closed: deleted with its topic
            try:
                os.fdatasync(fd)
            except OSError as exc:
                if exc.errno == errno.EBADF and self._fd < 0:  # closed while we synced
                    return self.flushed_position
                # named: the store's offline message says which file
                raise OSError(exc.errno, f"fdatasync of {self.path}: {exc.strerror}") from None
            self.flushed_position = target
        return self.flushed_position

    def warm_up(self) -> None:
        """Touch every page so the first appends do not fault (RocketMQ's warmMappedFile)."""
        zeros = bytes(1 << 20)
        for pos in range(0, self.size, len(zeros)):
            os.pwrite(self._fd, zeros[: min(len(zeros), self.size - pos)], pos)
        os.fdatasync(self._fd)

    def truncate_to(self, pos: int) -> None:
        """Drop everything from ``pos`` on: shrink then re-grow, so the tail reads as zeros."""
        self._drop_view()
        os.ftruncate(self._fd, pos)
        os.ftruncate(self._fd, self.size)
        if self._reserved:
            _reserve(self._fd, self.path, pos, self.size - pos)
        self.wrote_position = min(self.wrote_position, pos)
        self.flushed_position = min(self.flushed_position, pos)

    def close(self) -> bool:
        """Close the fd and the mapping; False (still open) while fetch buffers point into it."""
        if not self._drop_view():
            return False
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return True

    def destroy(self) -> bool:
        """Unlink the file and close it; the pages stay readable until the last view is gone."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        return self.close()

    def _drop_view(self) -> bool:
        if self._mm is None:
            return True
        try:
            self._view.release()
            self._mm.close()
        except BufferError:
            log.debug("%s is still read by in-flight responses; closing later", self.path)
            return False
        self._mm = None
        self._view = None
        return True


def _open(path: Path, size: int, create: bool, reserve: bool) -> int:
    if create and reserve:
        return _create_reserved(path, size)
    fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_reserved(path: Path, size: int) -> int:
    """Reserve under a temporary name, then rename: a crash mid-way never leaves a half-made
    segment under a real name (the next start removes the leftover)."""
    temporary = path.with_name(path.name + TEMPORARY_SUFFIX)
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _reserve(fd, temporary, 0, size)
        os.rename(temporary, path)
        _sync_directory(path.parent)  # the name must outlive a power cut like the data
    except BaseException:
        os.close(fd)
        temporary.unlink(missing_ok=True)
        raise
    return fd


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reserve(fd: int, path: Path, pos: int, length: int) -> None:
    """Give the file real blocks so a full disk fails here, not in a later write."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, pos, length)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # EOPNOTSUPP / EINVAL: the filesystem cannot; stay sparse
            os.ftruncate(fd, pos + length)
            return
        raise OSError(exc.errno, f"cannot reserve {length} bytes in {path}: {exc.strerror}") from exc
