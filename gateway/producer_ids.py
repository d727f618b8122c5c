"""Producer id allocation that survives restarts.

Ids are handed out from blocks (as Kafka's ProducerIdManager does): the end of the current block
is written to disk (atomic replace + fsync) before any id of it is used, so a restart, clean or
not, never hands out an id twice.
"""
from __future__ import annotations

from pathlib import Path

from commitgate.engine.topic_table import atomic_write

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        if self.path.exists():
            self._next = self._block_end = int(self.path.read_text().strip() or 0)

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, f"{self._block_end}\n".encode())
        pid = self._next
        self._next += 1
        return pid
