"""AllocateMappedFileService: creates the next CommitLog segment in the background.

When the writer takes segment N it asks for N+1 at once, so the pre-allocation (fallocate,
optional warm-up) runs on a worker thread while segment N fills and an append never waits
for file creation. A creation that fails is logged with its traceback when it fails, and the
writer's next roll creates the segment again (the restart of this service).
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.supervision import TaskHealth, TaskState

log = logging.getLogger(__name__)


class AllocateMappedFileService:
    def __init__(self, *, warm_up: bool, health: TaskHealth | None = None) -> None:
        self._warm_up = warm_up
        self._health = health or TaskHealth("allocate-mapped-file")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="allocate-mapped-file")
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, start_offset: int, size: int, next_path: Path) -> MappedFile:
        """The segment at ``path`` (ready-made if it was requested before); starts ``next_path``."""
        with self._lock:
            future = self._pending.pop(path, None)
        # a pre-allocation that failed (logged by _reported) is made again, now
        if future is None or future.exception() is not None:
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
            if future.exception() is None:  # a failure was logged when it came (_reported)
                future.result().destroy()
        self._executor.shutdown(wait=True)

    def _submit(self, path: Path, start_offset: int, size: int) -> Future[MappedFile]:
        future = self._executor.submit(self._create, path, start_offset, size)
        future.add_done_callback(self._reported)
        return future

    def _reported(self, future: Future[MappedFile]) -> None:
        """Record how a creation ended, the failure with its traceback."""
        exc = None if future.cancelled() else future.exception()
        if exc is None:
            self._health.state = TaskState.RUNNING
            return
        self._health.failed(exc)
        self._health.restarts += 1
        self._health.state = TaskState.RESTARTING
        # an I/O error (a full disk) is expected: its message says it all; anything else is a bug
        log.error("allocate-mapped-file: creating a CommitLog segment failed; the next roll "
                  "creates it again: %s", exc, exc_info=None if isinstance(exc, OSError) else exc)

    def _create(self, path: Path, start_offset: int, size: int) -> MappedFile:
        mapped = MappedFile(path, start_offset, size, create=True)
        if self._warm_up:
            mapped.warm_up()
        mapped.view()  # map now, off the writer's path
        log.debug("pre-allocated %s (%d bytes)", path, size)
        return mapped
