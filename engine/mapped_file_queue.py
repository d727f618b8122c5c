"""MappedFileQueue: a directory of equal-size MappedFiles named by their 20-digit start offset.

Together the files form one address space (the CommitLog's physical offsets, or a
ConsumeQueue's byte offsets). The files are contiguous: file i starts at first + i * size.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from commitgate.engine.mapped_file import TEMPORARY_SUFFIX, MappedFile
from commitgate.engine.paths import offset_file_name, parse_offset_file_name

log = logging.getLogger(__name__)

Factory = Callable[[Path, int, Path], MappedFile]  # (path, start offset, next path) -> file


class MappedFileQueue:
    def __init__(self, directory: Path, file_size: int, factory: Factory | None = None) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._factory = factory or self._create_now

    def load(self) -> None:
        """Open the existing segments; a gap or a foreign size is a damaged store."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*" + TEMPORARY_SUFFIX):
            log.info("removing %s, a segment whose allocation a crash cut short", leftover)
            leftover.unlink()
        for start in segment_starts(self.directory):
            path = self.directory / offset_file_name(start)
            if path.stat().st_size != self.file_size:
                raise StoreDamaged(f"{path}: size {path.stat().st_size}, expected {self.file_size}")
            if self.files and start != self.files[-1].end_offset:
                raise StoreDamaged(f"{path}: gap after {self.files[-1].path}")
            mapped = MappedFile(path, start, self.file_size, create=False)
            mapped.wrote_position = mapped.flushed_position = self.file_size
            self.files.append(mapped)

    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """The end of what was written."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start_offset + last.wrote_position

    @property
    def flushed_offset(self) -> int:
        for mapped in reversed(self.files):
            if mapped.flushed_position:
                return mapped.start_offset + mapped.flushed_position
        return self.min_offset

    def find(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, by arithmetic (no scan)."""
        if not self.files or offset < self.files[0].start_offset:
            return None
        index = (offset - self.files[0].start_offset) // self.file_size
        return self.files[index] if index < len(self.files) else None

    def last_for_append(self, first_start: int = 0) -> MappedFile:
        """The file appends go to; rolls to a new one when the last is full."""
        if self.files and self.files[-1].free_bytes > 0:
            return self.files[-1]
        start = self.files[-1].end_offset if self.files else first_start
        return self.new_file(start)

    def new_file(self, start: int) -> MappedFile:
        path = self.directory / offset_file_name(start)
        next_path = self.directory / offset_file_name(start + self.file_size)
        mapped = self._factory(path, start, next_path)
        self.files.append(mapped)
        return mapped

    def set_write_end(self, offset: int) -> None:
        """After load: files before ``offset`` are full, the one holding it is written up to it."""
        for mapped in self.files:
            pos = min(max(offset - mapped.start_offset, 0), self.file_size)
            mapped.wrote_position = mapped.flushed_position = pos

    def truncate(self, offset: int) -> None:
        """Drop everything at or past ``offset`` (recovery of a torn tail)."""
        kept: list[MappedFile] = []
        for mapped in self.files:
            if kept and mapped.start_offset >= offset:
                log.info("recovery: removing %s, wholly past offset %d", mapped.path, offset)
                mapped.destroy()
                continue
            if mapped.end_offset > offset:
                mapped.truncate_to(max(offset - mapped.start_offset, 0))
            kept.append(mapped)
        self.files = kept

    def delete_files_below(self, offset: int) -> list[MappedFile]:
        """Remove whole files that end at or before ``offset``; the last file always stays."""
        gone = []
        while len(self.files) > 1 and self.files[0].end_offset <= offset:
            gone.append(self.files.pop(0))
        return gone

    def flush(self) -> int:
        """fdatasync every file with unflushed bytes; returns the flushed end offset."""
        for mapped in self.files:
            if mapped.wrote_position > mapped.flushed_position:
                mapped.flush()
        return self.flushed_offset

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()

    def _create_now(self, path: Path, start: int, _next: Path) -> MappedFile:
        return MappedFile(path, start, self.file_size, create=True)


class StoreDamaged(Exception):
    """Files on disk contradict each other in a way recovery cannot repair."""


def segment_starts(directory: Path) -> list[int]:
    """Start offsets of the segment files in ``directory``, sorted; other files are ignored."""
    if not directory.is_dir():
        return []
    starts = (parse_offset_file_name(entry.name) for entry in directory.iterdir())
    return sorted(s for s in starts if s is not None)
