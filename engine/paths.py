"""Every path of the data directory is built here (RocketMQ's StorePathConfigHelper)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

OFFSET_NAME_DIGITS = 20


def offset_file_name(offset: int) -> str:
    """A segment's name: its start offset as 20 digits."""
    return f"{offset:0{OFFSET_NAME_DIGITS}d}"


def parse_offset_file_name(name: str) -> int | None:
    """The start offset a segment name encodes, or None for a foreign file."""
    if len(name) != OFFSET_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


@dataclass(frozen=True)
class StorePaths:
    root: Path

    @property
    def commitlog(self) -> Path:
        return self.root / "commitlog"

    @property
    def consumequeue(self) -> Path:
        return self.root / "consumequeue"

    def consumequeue_dir(self, topic: str, partition: int) -> Path:
        return self.root / "consumequeue" / topic / str(partition)

    def consumequeue_topic_dir(self, topic: str) -> Path:
        return self.root / "consumequeue" / topic

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort(self) -> Path:
        return self.root / "abort"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def topics_file(self) -> Path:
        return self.root / "config" / "topics.json"

    @property
    def consumequeue_ends(self) -> Path:
        return self.root / "config" / "consumequeue_ends.json"

    @property
    def lock(self) -> Path:
        return self.root / "lock"
