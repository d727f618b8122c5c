"""``store inspect``: what a data directory holds, and where its files disagree, offline.

The report lists the CommitLog segments, every topic-partition's ConsumeQueue, the IndexFiles,
the checkpoint and the topic table, and a consistency report that repairs nothing: each
finding names the file (and the offset) involved and says what the next start would do.
Nothing is written and no lock is taken (see engine/store_files.py); when a broker holds the
directory the figures are a moving picture and the report says so.

The ConsumeQueue checks read every unit from a queue's first to its last (20 bytes a record),
a block at a time: the smallest and largest unit of a block are found at C speed, and only a
block whose extremes point outside the CommitLog, or hold an empty unit, is looked at unit by
unit to name the offsets.
"""
from __future__ import annotations

import functools
import json
import os
import struct
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from commitgate.engine.checkpoint import Checkpoint
from commitgate.engine.commit_log import ENTRY_PREFIX, MESSAGE_MAGIC, PREFIX_SIZE, SHORT
from commitgate.engine.index_file import ENTRY_SIZE as INDEX_ENTRY_SIZE
from commitgate.engine.index_file import HEADER_SIZE as INDEX_HEADER_SIZE
from commitgate.engine.index_file import SLOT_SIZE, is_index_file_name, read_header
from commitgate.engine.mapped_file import TEMPORARY_SUFFIX
from commitgate.engine.mapped_file_queue import segment_starts
from commitgate.engine.paths import StorePaths, offset_file_name
from commitgate.engine.queue_core import CQ_UNIT, UNIT_SIZE
from commitgate.engine.store_files import (
    Segment,
    has_data,
    list_segments,
    lock_holder,
    map_readonly,
    store_paths,
    walk_entries,
)
from commitgate.engine.topic_table import TopicTable

DELETED_PREFIX = "~deleted~"  # a deleted topic's queue directory, removed at the next start
BLOCK_UNITS = 65_536  # units read at a time (1.25 MiB)

ERROR, WARNING = "error", "warning"


@dataclass
class Finding:
    severity: str  # "error": data lost or contradicted; "warning": the next start mends it
    file: str
    offset: int | None  # a position in ``file`` (bytes), or a Kafka offset where ``message`` says
    message: str


@dataclass
class SegmentInfo:
    file: str
    start_offset: int
    size: int
    written_bytes: int


@dataclass
class QueueInfo:
    topic: str
    partition: int
    directory: str
    files: list[str]
    units: int  # offsets with a unit, first_offset to end_offset
    first_offset: int
    end_offset: int  # the next offset: the last one + 1
    log_start_offset: int  # from config/topics.json
    recorded_end: int  # from config/consumequeue_ends.json (0: none recorded)


@dataclass
class IndexFileInfo:
    file: str
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    keys: int
    hash_slots: int
    capacity: int  # keys the file can take


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str]
    log_start_offsets: dict[int, int]
    created_phy: int


@dataclass
class StoreReport:
    data_dir: str
    in_use_by: int | None  # pid of the broker holding the directory
    abort_present: bool  # the broker runs, or stopped uncleanly
    commitlog_start: int = 0
    commitlog_end: int = 0  # end of written data
    segments: list[SegmentInfo] = field(default_factory=list)
    queues: list[QueueInfo] = field(default_factory=list)
    index_files: list[IndexFileInfo] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    topics: list[TopicInfo] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def note(self, severity: str, file: Path | str, offset: int | None, message: str) -> None:
        self.findings.append(Finding(severity, str(file), offset, message))


def inspect_store(data_dir: Path) -> StoreReport:
    """The report of ``data_dir``; NotAStore when it is no CommitGate data directory."""
    paths = store_paths(data_dir)
    holder = lock_holder(paths)
    report = StoreReport(str(paths.root), holder, paths.abort.exists())
    if report.abort_present and holder is None:
        report.note(WARNING, paths.abort, None, "the broker stopped uncleanly (abort marker "
                    "present): the next start re-verifies the CommitLog from the checkpoint "
                    "and replays what the ConsumeQueues lack")
    extent = _inspect_commitlog(paths, report)
    _inspect_checkpoint(paths, report)
    table = _load_topics(paths, report)
    _inspect_queues(paths, table, extent, report)
    _inspect_index(paths, report)
    return report


# ---- CommitLog ------------------------------------------------------------------------------


@dataclass
class _Extent:
    """Where the CommitLog's bytes are: the segments present, up to the end of written data."""

    segments: list[Segment]
    start: int
    end: int

    def segment_of(self, phy: int) -> Segment | None:
        for segment in self.segments:
            if segment.start <= phy < segment.end:
                return segment
        return None

    @property
    def contiguous(self) -> bool:
        return all(a.end == b.start for a, b in pairwise(self.segments))


def _inspect_commitlog(paths: StorePaths, report: StoreReport) -> _Extent:
    if not paths.commitlog.is_dir():
        report.note(ERROR, paths.commitlog, None, "no CommitLog directory")
    for leftover in paths.commitlog.glob("*" + TEMPORARY_SUFFIX):
        report.note(WARNING, leftover, None, "a segment whose allocation a crash cut short: "
                    "the next start removes it")
    segments = list_segments(paths)
    _check_segment_files(segments, report)
    with_data = [i for i, segment in enumerate(segments) if has_data(segment)]
    last = with_data[-1] if with_data else -1
    start = segments[0].start if segments else 0
    end = start
    for i, segment in enumerate(segments):
        if i == last:  # walked; those before are full, those after pre-allocated
            written = _written_bytes(segment, report)
            end = segment.start + written
        else:
            written = segment.size if i < last else 0
        report.segments.append(SegmentInfo(str(segment.path), segment.start, segment.size,
                                           written))
    report.commitlog_start, report.commitlog_end = start, end
    return _Extent(segments, start, end)


def _check_segment_files(segments: list[Segment], report: StoreReport) -> None:
    if not segments:
        return
    size = segments[0].size
    for before, segment in pairwise(segments):
        if segment.start != before.end:
            report.note(ERROR, segment.path, None,
                        f"gap in the segment names: nothing holds CommitLog offsets "
                        f"[{before.end}, {segment.start}) between {before.path.name} and "
                        f"{segment.path.name}")
    for segment in segments:
        if segment.size != size:
            report.note(ERROR, segment.path, None, f"size {segment.size}, the first segment's "
                        f"is {size}: the broker refuses to start on it")


def _written_bytes(segment: Segment, report: StoreReport) -> int:
    """Where the data of the last segment with data ends: its entries walked by their headers."""
    view = map_readonly(segment.path)
    if view is None:
        return 0
    try:
        walk = walk_entries(view, segment.start, 0, len(view), None)
    finally:
        view.close()
    for damage in walk.damage:
        report.note(ERROR, segment.path, damage.pos,
                    f"CommitLog offset {segment.start + damage.pos}: {damage.message}; "
                    f"{damage.skipped} bytes unreadable (`store verify` checks every entry)")
    return walk.unwritten_at if walk.unwritten_at is not None else walk.pos


# ---- checkpoint and topic table -------------------------------------------------------------


def _inspect_checkpoint(paths: StorePaths, report: StoreReport) -> None:
    try:
        page = paths.checkpoint.read_bytes()
    except FileNotFoundError:
        if report.commitlog_end > report.commitlog_start:
            report.note(WARNING, paths.checkpoint, None, "no checkpoint beside a CommitLog with "
                        "data: the next start verifies the whole CommitLog")
        return
    report.checkpoint = Checkpoint.decode(page)
    if report.checkpoint is None:
        report.note(ERROR, paths.checkpoint, 0, "the checkpoint page's CRC does not match "
                    "(torn or damaged): the next start verifies from the oldest data")
        return
    marks = {"commitlog_flushed": report.checkpoint.commitlog_flushed,
             "consumequeue_flushed": report.checkpoint.consumequeue_flushed,
             "index_flushed": report.checkpoint.index_flushed}
    for name, mark in marks.items():
        if mark > report.commitlog_end:
            report.note(ERROR, paths.checkpoint, None,
                        f"checkpoint ahead of the disk: {name} is {mark} but the CommitLog's "
                        f"written data ends at {report.commitlog_end}")


def _load_topics(paths: StorePaths, report: StoreReport) -> TopicTable:
    table = TopicTable(paths.topics_file)
    try:
        table.load()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        report.note(ERROR, paths.topics_file, None, f"the topic table is unreadable: {exc}")
        return table
    if not paths.topics_file.exists():
        report.note(WARNING, paths.topics_file, None, "no topic table: no topics")
    report.topics = [TopicInfo(t.name, t.topic_id, t.partitions, dict(t.configs),
                               dict(t.log_start_offsets), t.created_phy)
                     for t in sorted(table.topics.values(), key=lambda t: t.name)]
    return table


# ---- ConsumeQueues --------------------------------------------------------------------------


def _inspect_queues(paths: StorePaths, table: TopicTable, extent: _Extent,
                    report: StoreReport) -> None:
    ends = _recorded_ends(paths, report)
    for topic in sorted(table.topics.values(), key=lambda t: t.name):
        for partition in range(topic.partitions):
            directory = paths.consumequeue_dir(topic.name, partition)
            recorded = ends.get(topic.name, [])
            info = QueueInfo(topic.name, partition, str(directory), [], 0, 0, 0,
                             topic.log_start_offsets.get(partition, 0),
                             recorded[partition] if partition < len(recorded) else 0)
            report.queues.append(info)
            if not directory.is_dir():
                report.note(ERROR, directory, None,
                            f"{topic.name}-{partition} is in {paths.topics_file.name} but its "
                            f"ConsumeQueue directory is missing (deleted by hand?): the next "
                            f"start rebuilds it from the CommitLog")
                continue
            _QueueCheck(info, directory, extent, report).run()
    _leftover_queue_dirs(paths, table, report)


def _recorded_ends(paths: StorePaths, report: StoreReport) -> dict[str, list[int]]:
    try:
        data = json.loads(paths.consumequeue_ends.read_bytes())
        return {str(topic): [int(end) for end in ends] for topic, ends in data.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        report.note(WARNING, paths.consumequeue_ends, None,
                    f"unreadable ({exc}): lost ConsumeQueue files go unnoticed at the next start")
        return {}


def _leftover_queue_dirs(paths: StorePaths, table: TopicTable, report: StoreReport) -> None:
    if not paths.consumequeue.is_dir():
        return
    for topic_dir in sorted(paths.consumequeue.iterdir()):
        topic = table.topics.get(topic_dir.name)
        if topic_dir.name.startswith(DELETED_PREFIX):
            report.note(WARNING, topic_dir, None, "a deleted topic's queues: the next start "
                        "removes them")
        elif topic is None:
            report.note(WARNING, topic_dir, None, f"ConsumeQueues of '{topic_dir.name}', which "
                        f"is not in {paths.topics_file.name}")
        elif topic_dir.is_dir():
            for part_dir in sorted(topic_dir.iterdir()):
                if not (part_dir.name.isdigit() and int(part_dir.name) < topic.partitions):
                    report.note(WARNING, part_dir, None, f"not a partition of '{topic.name}' "
                                f"({topic.partitions} partitions)")


class _QueueCheck:
    """One partition's queue files: the stored range, then every unit against the CommitLog."""

    def __init__(self, info: QueueInfo, directory: Path, extent: _Extent,
                 report: StoreReport) -> None:
        self.info = info
        self.directory = directory
        self.extent = extent
        self.report = report
        self.name = f"{info.topic}-{info.partition}"
        self.file_bytes = 0
        self._fds: dict[int, int] = {}  # file start -> descriptor, for the duration of run()

    def run(self) -> None:
        try:
            self._run()
        finally:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def _run(self) -> None:
        starts = self._files()
        info = self.info
        if starts:
            info.first_offset = self._first_used(starts[0])
            info.end_offset = max(self._end_of_data(starts[-1]), info.first_offset)
            info.units = info.end_offset - info.first_offset
        else:
            info.first_offset = info.end_offset = info.log_start_offset
        if info.units:
            self._check_units(starts)
            self._check_target(info.end_offset - 1)
        self._check_range()

    def _path(self, start: int) -> Path:
        return self.directory / offset_file_name(start)

    def _files(self) -> list[int]:
        """The queue's file starts (byte offsets) that are whole and aligned."""
        starts = segment_starts(self.directory)
        if not starts:
            return []
        self.file_bytes = self._path(starts[0]).stat().st_size
        good = []
        for start in starts:
            size = self._path(start).stat().st_size
            if size != self.file_bytes or size % UNIT_SIZE or start % size:
                self.report.note(ERROR, self._path(start), None,
                                 f"{self.name}: size {size} or start misaligned with the "
                                 f"queue's {self.file_bytes}-byte files")
                continue
            if good and start != good[-1] + self.file_bytes:
                self.report.note(ERROR, self._path(start), None,
                                 f"{self.name}: queue files missing between "
                                 f"{offset_file_name(good[-1])} and {offset_file_name(start)}")
            good.append(start)
        self.info.files = [str(self._path(start)) for start in good]
        return good

    def _pread(self, start: int, pos: int, length: int) -> bytes:
        fd = self._fds.get(start)
        if fd is None:
            fd = self._fds[start] = os.open(self._path(start), os.O_RDONLY)
        return os.pread(fd, length, pos)

    def _size_at(self, start: int, unit: int) -> int:
        data = self._pread(start, unit * UNIT_SIZE, UNIT_SIZE)
        return CQ_UNIT.unpack(data)[1] if len(data) == UNIT_SIZE else 0

    def _first_used(self, start: int) -> int:
        """The first offset with a unit in the first file (a rebuilt queue may start mid-file)."""
        first = start // UNIT_SIZE
        if self._size_at(start, 0):
            return first
        data = self._pread(start, 0, self.file_bytes)
        zeros = len(data) - len(data.lstrip(b"\0"))
        return first + (zeros // UNIT_SIZE if zeros < len(data) else len(data) // UNIT_SIZE)

    def _end_of_data(self, start: int) -> int:
        """The offset after the last unit of the last file, searched as the broker does."""
        first = start // UNIT_SIZE
        lo, hi = max(first, self.info.first_offset), first + self.file_bytes // UNIT_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if self._size_at(start, mid - first):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _check_units(self, starts: list[int]) -> None:
        """Every unit from the first offset to the end: empty, or outside the CommitLog."""
        per_file = self.file_bytes // UNIT_SIZE
        problems: dict[str, list] = {}  # kind -> [first offset, count, file, position]
        for start in starts:
            first = start // UNIT_SIZE
            # units below the log start are dead: their segments may be gone already
            lo = max(first, self.info.first_offset, self.info.log_start_offset)
            hi = min(first + per_file, self.info.end_offset)
            for block in range(lo, hi, BLOCK_UNITS):
                data = self._pread(start, (block - first) * UNIT_SIZE,
                                   min(BLOCK_UNITS, hi - block) * UNIT_SIZE)
                if self._suspicious(data):
                    self._scan_block(data, block, start, problems)
        for kind, (offset, count, start, pos) in problems.items():
            self.report.note(ERROR, self._path(start), pos,
                             f"{self.name}: {count} units {kind}, the first at offset {offset}")

    def _suspicious(self, data: bytes) -> bool:
        """Whether a unit of ``data`` may be empty or point outside the CommitLog: one unpack
        of all phys, one of all sizes, their extremes (a flagged block is then scanned)."""
        count = len(data) // UNIT_SIZE
        phys, sizes = _column(count, "q12x").unpack(data), _column(count, "8xi8x").unpack(data)
        return (min(sizes) <= 0 or min(phys) < self.extent.start
                or max(phys) + max(sizes) > self.extent.end or not self.extent.contiguous)

    def _scan_block(self, data: bytes, block: int, start: int, problems: dict) -> None:
        for i, (phy, size, _tags) in enumerate(CQ_UNIT.iter_unpack(data)):
            kind = self._unit_problem(phy, size)
            if kind is None:
                continue
            offset = block + i
            seen = problems.get(kind)
            if seen is None:
                problems[kind] = [offset, 1, start, offset * UNIT_SIZE - start]
            else:
                seen[1] += 1

    def _unit_problem(self, phy: int, size: int) -> str | None:
        extent = self.extent
        if size <= 0:
            return "are empty between the queue's first and last units"
        if phy + size > extent.end:
            return f"point past the CommitLog's written end {extent.end}"
        if phy < extent.start or extent.segment_of(phy) is None:
            return "point into a missing CommitLog segment"
        return None

    def _check_target(self, offset: int) -> None:
        """The entry the queue's last unit points at must be this partition's batch holding
        ``offset``, of the unit's size."""
        start = offset * UNIT_SIZE // self.file_bytes * self.file_bytes
        phy, size, _tags = CQ_UNIT.unpack(self._pread(start, offset * UNIT_SIZE - start,
                                                      UNIT_SIZE))
        segment = self.extent.segment_of(phy)
        if segment is None or phy + size > self.extent.end:
            return  # reported by the unit scan
        problem = _entry_mismatch(segment, phy, size, self.info.topic, self.info.partition,
                                  offset)
        if problem:
            self.report.note(ERROR, self._path(start), offset * UNIT_SIZE - start,
                             f"{self.name}: the unit of offset {offset} points at CommitLog "
                             f"offset {phy} ({segment.path.name}), which {problem}")

    def _check_range(self) -> None:
        info = self.info
        if info.units and info.first_offset > info.log_start_offset:
            self.report.note(WARNING, self.directory, info.log_start_offset,
                             f"{self.name}: offsets {info.log_start_offset} to "
                             f"{info.first_offset - 1} (from the log start offset) have no "
                             f"units")
        if info.end_offset < info.recorded_end and info.log_start_offset < info.recorded_end:
            self.report.note(ERROR, self.directory, info.end_offset,
                             f"{self.name}: the queue ends at offset {info.end_offset}, below "
                             f"its end {info.recorded_end} recorded at the last flush: files "
                             f"were lost; the next start rebuilds it from the CommitLog")


@functools.lru_cache(maxsize=8)
def _column(count: int, field: str) -> struct.Struct:
    """A struct reading one field of each of ``count`` units (``field`` pads the rest)."""
    return struct.Struct(">" + field * count)


def _entry_mismatch(segment: Segment, phy: int, size: int, topic: str, partition: int,
                    offset: int) -> str | None:
    """What about the entry at ``phy`` contradicts a unit of ``topic``-``partition`` for
    ``offset`` of ``size`` bytes, or None."""
    fd = os.open(segment.path, os.O_RDONLY)
    try:
        entry = os.pread(fd, size, phy - segment.start)
    finally:
        os.close(fd)
    if len(entry) < PREFIX_SIZE:
        return "is cut short by the segment's end"
    (total, magic, _crc, queue_id, count, base, _phy, _sf, _bt, _bh, _st, _sh, _rt, _tx,
     body_len) = ENTRY_PREFIX.unpack_from(entry)
    if magic != MESSAGE_MAGIC or total != size:
        return f"is no entry of {size} bytes (TOTALSIZE {total}, MAGICCODE {magic:#010x})"
    topic_at = PREFIX_SIZE + body_len
    if not 0 <= topic_at <= size - SHORT.size:
        return "has a body length past its end"
    (topic_len,) = SHORT.unpack_from(entry, topic_at)
    name = entry[topic_at + SHORT.size:topic_at + SHORT.size + topic_len].decode(errors="replace")
    if (name, queue_id) != (topic, partition):
        return f"belongs to {name}-{queue_id}"
    if not base <= offset < base + max(count, 1):
        return f"holds offsets {base} to {base + count - 1}"
    return None


# ---- IndexFiles -----------------------------------------------------------------------------


def _inspect_index(paths: StorePaths, report: StoreReport) -> None:
    if not paths.index.is_dir():
        return
    for path in sorted(p for p in paths.index.iterdir() if is_index_file_name(p.name)):
        size = path.stat().st_size
        with open(path, "rb") as file:
            page = file.read(INDEX_HEADER_SIZE)
        if len(page) < INDEX_HEADER_SIZE:
            report.note(ERROR, path, 0, f"{size} bytes is shorter than the IndexFile header: "
                        f"the next start drops it and every later IndexFile")
            continue
        header = read_header(page)
        capacity = (size - INDEX_HEADER_SIZE - header.hash_slot_count * SLOT_SIZE) \
            // INDEX_ENTRY_SIZE
        if header.hash_slot_count <= 0 or capacity <= 1 \
                or not 1 <= header.index_count <= capacity:
            report.note(ERROR, path, 0, f"header ({header.hash_slot_count} slots, index count "
                        f"{header.index_count}) does not fit a {size}-byte file: the next "
                        f"start drops it and every later IndexFile")
            continue
        keys = header.index_count - 1
        report.index_files.append(IndexFileInfo(
            str(path), header.begin_timestamp, header.end_timestamp, header.begin_phy_offset,
            header.end_phy_offset, keys, header.hash_slot_count, capacity - 1))
        if keys and header.end_phy_offset >= report.commitlog_end:
            report.note(ERROR, path, None, f"indexes CommitLog offset {header.end_phy_offset}, "
                        f"at or past the written end {report.commitlog_end}")
