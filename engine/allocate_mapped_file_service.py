"""AllocateMappedFileService: creates the next CommitLog segment in the background.

When the writer takes segment N it asks for N+1 at once, so the pre-allocation (fallocate,
optional warm-up) runs on a worker thread while segment N fills and an append never waits
for file creation.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from engine.mapped_file import MappedFile

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    def __init__(self, *, warm_up: bool) -> None:
        self._warm_up = warm_up
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="allocate-mapped-file")
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, start_offset: int, size: int, next_path: Path) -> MappedFile:
        """The segment at ``path`` (ready-made if it was requested before); starts ``next_path``."""
        with self._lock:
            future = self._pending.pop(path, None)
        if future is None:
            future = self._submit(path, start_offset, size)
        mapped = future.result()
        with self._lock:
            if next_path not in self._pending:
                self._pending[next_path] = self._submit(next_path, start_offset + size, size)
        return mapped

    def shutdown(self) -> None:
        """Wait for work in flight, then remove pre-allocated files nobody took."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            try:
                future.result().destroy()
            except OSError as exc:
                log.warning("pre-allocated segment could not be created: %s", exc)
        self._executor.shutdown(wait=True)

    def _submit(self, path: Path, start_offset: int, size: int) -> Future[MappedFile]:
        return self._executor.submit(self._create, path, start_offset, size)

    def _create(self, path: Path, start_offset: int, size: int) -> MappedFile:
        mapped = MappedFile(path, start_offset, size, create=True)
        if self._warm_up:
            mapped.warm_up()
        mapped.view()  # map now, off the writer's path
        log.debug("pre-allocated %s (%d bytes)", path, size)
        return mapped
