"""Read-only access to a data directory's files, for the offline tools (store inspect / verify).

Nothing here writes, creates or locks anything in the directory: files are opened read-only
and mapped read-only, and whether a broker holds the directory is read from ``/proc/locks``
(taking the ``lock`` even for a moment could make a broker starting then fail).

The entry walk follows the CommitLog layout of engine/commit_log.py. Entries are walked one
by one in Python: the format forces it (each entry's size is in its header); the CRC of a
body is computed by the body's owner (``BodyFormat``) over a zero-copy slice of the mapping.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.commit_log import (
    BLANK,
    BLANK_MAGIC,
    ENTRY_PREFIX,
    MESSAGE_MAGIC,
    PREFIX_SIZE,
    SHORT,
)
from commitgate.engine.mapped_file_queue import segment_starts
from commitgate.engine.paths import StorePaths, offset_file_name

MAGIC_BYTES = MESSAGE_MAGIC.to_bytes(4, "big")
MAGIC_AT = 4  # MAGICCODE's place in an entry
PROC_LOCKS = Path("/proc/locks")
# TOTALSIZE, MAGICCODE, BODYCRC, PHYSICALOFFSET, BODY length: what the walk needs of a prefix
ENTRY_HEAD = struct.Struct(">iII16xq48xi")


class NotAStore(Exception):
    """The directory holds none of a CommitGate data directory's files."""


def store_paths(data_dir: Path) -> StorePaths:
    """The directory's paths; NotAStore unless it has a CommitLog, a checkpoint or a topic table."""
    paths = StorePaths(Path(data_dir))
    if not paths.root.is_dir():
        raise NotAStore(f"{paths.root} is not a directory")
    if not (paths.commitlog.is_dir() or paths.checkpoint.is_file() or paths.topics_file.is_file()):
        raise NotAStore(f"{paths.root} holds no commitlog/, checkpoint or config/topics.json: "
                        f"not a CommitGate data directory")
    return paths


def lock_holder(paths: StorePaths) -> int | None:
    """The pid of the process holding the directory's ``lock`` (a running broker), else None.

    Read from /proc/locks: the lock file's device and inode in a FLOCK line."""
    try:
        stat = paths.lock.stat()
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 9751 fe:00:2146359 0 EOF" ("->" marks a blocked waiter)
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            return int(fields[4])
    return None


@dataclass(frozen=True)
class Segment:
    path: Path
    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


def list_segments(paths: StorePaths) -> list[Segment]:
    """The CommitLog segment files by start offset (gaps and odd sizes are the caller's to
    judge)."""
    directory = paths.commitlog
    return [Segment(directory / offset_file_name(start), start,
                    (directory / offset_file_name(start)).stat().st_size)
            for start in segment_starts(directory)]


def has_data(segment: Segment) -> bool:
    """Whether anything was written at the segment's start (pre-allocated ones are zeros)."""
    with open(segment.path, "rb") as file:
        return file.read(BLANK.size).strip(b"\0") != b""


def map_readonly(path: Path) -> mmap.mmap | None:
    """A read-only mapping of the file read sequentially, None for an empty file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size == 0:
            return None
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


@dataclass
class Damage:
    """A stretch of a segment that is not what the CommitLog format says."""

    pos: int  # position in the segment file
    message: str
    skipped: int = 0  # bytes after ``pos`` that could not be walked (a damaged header)


@dataclass
class Walk:
    """One walk over a stretch of a segment."""

    pos: int  # where it stopped
    entries: int = 0
    entry_bytes: int = 0  # TOTALSIZE of the entries walked
    blank_at: int | None = None  # a BLANK filler closes the segment here
    unwritten_at: int | None = None  # zeros from here: the end of written data
    damage: list[Damage] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.blank_at is not None or self.unwritten_at is not None


def walk_entries(view: mmap.mmap, base_phy: int, pos: int, until: int,
                 body_format: BodyFormat | None) -> Walk:
    """Walk the entries that start in [pos, until) of a segment mapping ``view`` (``base_phy`` in
    the CommitLog). Each message entry's header must hold together (size, PHYSICALOFFSET, body,
    topic and properties lengths); with ``body_format`` its BODYCRC and the body's own checksum
    are checked too. A header that does not hold together is damage: the walk resumes at the
    next position that starts a valid-looking entry (MAGICCODE and PHYSICALOFFSET agree)."""
    walk = Walk(pos)
    with memoryview(view) as whole:
        while True:
            pos = _walk(view, whole, base_phy, pos, until, body_format, walk)
            if pos >= until or pos + BLANK.size > len(view) or walk.finished:
                break
            pos = _stop(view, base_phy, pos, walk)
    walk.pos = pos
    return walk


def _walk(view: mmap.mmap, whole: memoryview, base_phy: int, pos: int, until: int,
          body_format: BodyFormat | None, walk: Walk) -> int:
    """The loop of walk_entries: the usual entry costs two unpacks of its header and
    trailer lengths and, when checking, one checksum call; anything else goes to _stop."""
    size = len(view)
    head, short = ENTRY_HEAD.unpack_from, SHORT.unpack_from
    computed = body_format.computed_checksum if body_format is not None else None
    while pos < until and pos + PREFIX_SIZE <= size:
        total, magic, crc, stored_phy, body_len = head(view, pos)
        end, topic_at = pos + total, pos + PREFIX_SIZE + body_len
        if magic != MESSAGE_MAGIC or stored_phy != base_phy + pos or end > size \
                or body_len < 0 or topic_at + 4 > end:
            break
        props_at = topic_at + 2 + short(view, topic_at)[0]
        if props_at + 2 > end or props_at + 2 + short(view, props_at)[0] != end:
            break
        if computed is not None:
            body = whole[pos + PREFIX_SIZE:topic_at]
            if computed(body) != crc:
                walk.damage.append(_crc_damage(pos, total, crc, body, body_format))
        walk.entries += 1
        walk.entry_bytes += total
        pos = end
    return pos


def _stop(view: mmap.mmap, base_phy: int, pos: int, walk: Walk) -> int:
    """What ended the usual loop at ``pos``: a BLANK filler or unwritten zeros (noted in
    ``walk``), or damage; returns where the walk goes on (the next recognisable entry)."""
    size = len(view)
    total, magic = BLANK.unpack_from(view, pos)
    if magic == BLANK_MAGIC and total == size - pos:
        walk.blank_at = pos
        return size
    if total == 0 and magic == 0:
        walk.unwritten_at = pos
        return pos
    if magic == MESSAGE_MAGIC and pos + PREFIX_SIZE <= size:
        problem = _header_problem(view, pos, base_phy, ENTRY_PREFIX.unpack_from(view, pos))
    else:
        problem = (f"no entry starts here (TOTALSIZE {total}, MAGICCODE {magic:#010x}, "
                   f"{size - pos} bytes before the segment's end)")
    resume = _next_entry(view, base_phy, pos + 1)
    walk.damage.append(Damage(pos, problem or "the entry header does not hold together",
                              resume - pos))
    return resume


def _header_problem(view: mmap.mmap, pos: int, base_phy: int, fields: tuple) -> str | None:
    """Why the message entry header at ``pos`` does not hold together, or None."""
    total, stored_phy, body_len = fields[0], fields[6], fields[14]
    if stored_phy != base_phy + pos:
        return f"PHYSICALOFFSET says {stored_phy}, the entry is at {base_phy + pos}"
    topic_at = pos + PREFIX_SIZE + body_len
    if body_len < 0 or topic_at + SHORT.size > len(view):
        return f"body length {body_len} passes the segment's end"
    props_at = topic_at + SHORT.size + SHORT.unpack_from(view, topic_at)[0]
    if props_at + SHORT.size > len(view):
        return "the topic length passes the segment's end"
    implied = props_at + SHORT.size + SHORT.unpack_from(view, props_at)[0] - pos
    if implied != total:
        return (f"TOTALSIZE {total} disagrees with the {implied} bytes its body, topic and "
                f"properties take")
    return None


def _crc_damage(pos: int, total: int, crc: int, body: memoryview, body_format: BodyFormat
                ) -> Damage:
    """Which checksum disagrees: the body's bytes with its own CRC, or BODYCRC with both."""
    entry = f"entry of {total} bytes"
    computed = body_format.computed_checksum(body)
    try:
        stored = body_format.stored_checksum(body)
    except (ValueError, struct.error):  # too short to hold one
        return Damage(pos, f"{entry}: its body of {len(body)} bytes cannot hold a checksum")
    if computed != stored:
        return Damage(pos, f"{entry}: body CRC mismatch: the batch says {stored:#010x}, its "
                           f"bytes give {computed:#010x}")
    return Damage(pos, f"{entry}: BODYCRC {crc:#010x} in the entry header differs from the "
                       f"batch's CRC {stored:#010x}")


def _next_entry(view: mmap.mmap, base_phy: int, start: int) -> int:
    """The first position at or after ``start`` whose MAGICCODE and PHYSICALOFFSET agree with
    an entry starting there; the segment's size when there is none."""
    size = len(view)
    at = view.find(MAGIC_BYTES, start + MAGIC_AT)
    while at >= 0:
        pos = at - MAGIC_AT
        if pos + PREFIX_SIZE <= size and ENTRY_PREFIX.unpack_from(view, pos)[6] == base_phy + pos:
            return pos
        at = view.find(MAGIC_BYTES, at + 1)
    return size

