"""The data directory's claims at start: a volume that can hold the store, one process in it."""
from __future__ import annotations

import fcntl
import os

from commitgate.engine.paths import StorePaths

# A data directory's filesystem must hold this many CommitLog segments: the one written, the
# pre-allocated next one, the cleaner's reserve and one of data.
MIN_SEGMENTS_ON_VOLUME = 4


class StoreLocked(Exception):
    """Another process has the data directory open."""


class VolumeTooSmall(Exception):
    """The data directory's filesystem cannot hold the store's segments."""


def check_volume(paths: StorePaths, segment_bytes: int) -> None:
    """Raise VolumeTooSmall, naming the segment size that would fit, when the directory's
    filesystem cannot hold MIN_SEGMENTS_ON_VOLUME segments."""
    stat = os.statvfs(paths.root)
    size = stat.f_blocks * stat.f_frsize
    if size < MIN_SEGMENTS_ON_VOLUME * segment_bytes:
        raise VolumeTooSmall(
            f"{paths.root} is on a filesystem of {size} bytes, which cannot hold "
            f"{MIN_SEGMENTS_ON_VOLUME} CommitLog segments of {segment_bytes} bytes (the one "
            f"written, the next one, the cleaner's reserve, data): set "
            f"commitlog.segment.bytes to {size // MIN_SEGMENTS_ON_VOLUME} or less")


def lock_directory(paths: StorePaths) -> int:
    """Take the directory's lock file (StoreLocked when another process holds it); the lock
    lasts until the returned descriptor is closed."""
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLocked(f"{paths.root} is in use by another process") from None
    return fd
