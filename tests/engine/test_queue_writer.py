"""QueueWriter: many queues' writes on two threads; pwrite_all in C and in Python alike."""
from __future__ import annotations

import errno
import os

import pytest

from commitgate.engine import queue_writer
from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.queue_writer import PARALLEL_FROM, QueueWriter, TailWrites, UnitWrite
from tests.c_and_python import implementations

WRITERS = implementations("engine._queue_core", "pwrite_all", queue_writer._pwrite_all)


@pytest.mark.parametrize("pwrite_all", WRITERS)
def test_pwrite_all_writes_each_buffer_and_reports_each_errno(tmp_path, pwrite_all):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    read_only = os.open(path, os.O_RDONLY)
    closed = os.open(path, os.O_RDONLY)
    os.close(closed)
    try:
        errors = pwrite_all([fd, read_only, fd, closed, fd, fd],
                            [b"abc", b"zz", bytearray(b"de"), b"zz", memoryview(b"xfgx")[1:3], b"zz"],
                            [0, 0, 5, 0, 8, -1])
        assert errors == [0, errno.EBADF, 0, errno.EBADF, 0, errno.EINVAL]
        assert path.read_bytes() == b"abc\0\0de\0fg"
        assert pwrite_all([], [], []) == []
        with pytest.raises(ValueError):
            pwrite_all([fd], [b"a", b"b"], [0])
        with pytest.raises(OverflowError):
            pwrite_all([2**40], [b"a"], [0])
        with pytest.raises(TypeError):
            pwrite_all([fd], ["not bytes"], [0])
    finally:
        os.close(fd)
        os.close(read_only)


@pytest.mark.parametrize("count", [PARALLEL_FROM - 1, 4 * PARALLEL_FROM])
def test_a_run_writes_every_queue_in_order_and_stops_a_queue_at_its_failure(tmp_path, count):
    """Below PARALLEL_FROM on the calling thread, above it half the queues on the helper
    thread. Queue 0 makes two writes; queue 1's first write fails (a descriptor gone), so its
    second is not made (it would leave a hole); the other queues are written, the second half
    of them as TailWrites, whose last one fails."""
    files = [MappedFile(tmp_path / f"{i:04d}", 0, 4096, create=True, reserve=False)
             for i in range(count)]
    writes = [UnitWrite(mapped, 7 * i, memoryview(bytes([i % 256]) * (i + 1)))
              for i, mapped in enumerate(files)]
    for failing in (2, count - 1):
        os.close(files[failing]._fd)
        files[failing]._fd = os.open(os.devnull, os.O_RDONLY)
    middle = count // 2 + 2
    queues = [writes[:2], writes[2:4]] + [[write] for write in writes[4:middle]]
    tails = TailWrites()
    for write in writes[middle:]:
        tails.fds.append(write.file.fileno())
        tails.buffers.append(write.data)
        tails.offsets.append(write.at)
    writer = QueueWriter()
    try:
        writer.run(queues, tails)
    finally:
        writer.close()
    assert [i for i, write in enumerate(writes[:middle]) if write.error is not None] == [2]
    assert writes[2].error.errno == errno.EBADF and "0002" in str(writes[2].error)
    assert tails.errors == [0] * (count - middle - 1) + [errno.EBADF]
    for i, mapped in enumerate(files):
        expected = bytes(i + 1) if i in (2, 3, count - 1) else bytes([i % 256]) * (i + 1)
        assert mapped.path.read_bytes()[7 * i : 8 * i + 1] == expected, i
        mapped.close()
