"""``store verify``: every CommitLog entry checked, offline, from the first segment to the end of
written data.

Each entry's header must hold together (TOTALSIZE, MAGICCODE, PHYSICALOFFSET, body, topic and
properties lengths) and its checksums must agree: the body's own (a Kafka batch's CRC-32C,
computed by the ``BodyFormat`` the caller hands in) with the body's bytes, and the entry's
BODYCRC with the body's. A damaged header is reported once and the walk resumes at the next
entry it can recognise. Segments are mapped read-only and walked in slices, the progress
callback called after each. The prefix fields the checks above do not cover (partition,
offsets, timestamps, hosts) carry no checksum in the format, so damage there goes unseen.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.store_files import (
    Segment,
    Walk,
    has_data,
    list_segments,
    lock_holder,
    map_readonly,
    store_paths,
    walk_entries,
)

SLICE = 64 << 20  # bytes walked between progress calls
Progress = Callable[[int, int], None]  # (bytes done, bytes in all: exact once done)


@dataclass
class Mismatch:
    segment: str  # the segment file
    file_offset: int  # position in that file
    commitlog_offset: int
    problem: str
    skipped_bytes: int = 0  # bytes after it that could not be walked (a damaged header)


@dataclass
class VerifyResult:
    data_dir: str
    in_use_by: int | None  # pid of the broker holding the directory: figures may move
    segments: int = 0  # segment files walked
    entries: int = 0
    bytes: int = 0  # the walked entries' TOTALSIZE
    first_offset: int = 0  # where the CommitLog starts
    end_offset: int = 0  # where its written data ends
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.mismatches


def verify_store(data_dir: Path, body_format: BodyFormat, progress: Progress | None = None
                 ) -> VerifyResult:
    """Walk and check every entry of the CommitLog in ``data_dir`` (NotAStore when it is no
    data directory). Only segments up to the last one with data are walked: the ones after it
    are pre-allocated, never written."""
    paths = store_paths(data_dir)
    segments = list_segments(paths)
    with_data = [i for i, segment in enumerate(segments) if has_data(segment)]
    walked = segments[: with_data[-1] + 1] if with_data else []
    result = VerifyResult(str(paths.root), lock_holder(paths), len(walked))
    result.first_offset = result.end_offset = segments[0].start if segments else 0
    total = sum(segment.size for segment in walked)
    done = 0
    for i, segment in enumerate(walked):
        if i and segment.start != walked[i - 1].end:
            gap = walked[i - 1].end
            result.mismatches.append(Mismatch(
                str(segment.path), 0, segment.start,
                f"no segment file holds CommitLog offsets [{gap}, {segment.start})",
                segment.start - gap))

        def report(pos: int, before: int = done, whole: int = total) -> None:
            if progress is not None:
                progress(before + pos, whole)

        end = _verify_segment(segment, body_format, result, last=i == len(walked) - 1,
                              report=report)
        result.end_offset = segment.start + end
        done += segment.size
        if end < segment.size:  # the end of written data: the rest was never walked
            total -= segment.size - end
    if progress is not None:
        progress(total, total)
    return result


def _verify_segment(segment: Segment, body_format: BodyFormat, result: VerifyResult, *,
                    last: bool, report: Callable[[int], None]) -> int:
    """Walk one segment; returns where its written data ends (its size unless it is the last)."""
    view = map_readonly(segment.path)
    if view is None:
        result.mismatches.append(Mismatch(str(segment.path), 0, segment.start,
                                          "the segment file is empty"))
        return 0
    try:
        pos = 0
        while pos < len(view):
            walk = walk_entries(view, segment.start, pos, min(pos + SLICE, len(view)),
                                body_format)
            _collect(segment, walk, result)
            pos = walk.pos
            report(pos)
            if walk.unwritten_at is not None:
                return pos if last else _unwritten_gap(segment, pos, len(view), result)
            if walk.finished:
                break
        return len(view)
    finally:
        view.close()


def _collect(segment: Segment, walk: Walk, result: VerifyResult) -> None:
    result.entries += walk.entries
    result.bytes += walk.entry_bytes
    result.mismatches.extend(
        Mismatch(str(segment.path), damage.pos, segment.start + damage.pos, damage.message,
                 damage.skipped) for damage in walk.damage)


def _unwritten_gap(segment: Segment, pos: int, size: int, result: VerifyResult) -> int:
    """A segment before the last one with data ends in zeros: those bytes were lost."""
    result.mismatches.append(Mismatch(
        str(segment.path), pos, segment.start + pos,
        f"zeros from here to the segment's end ({size - pos} bytes) where entries or a BLANK "
        f"filler should be: a later segment holds data", size - pos))
    return size

