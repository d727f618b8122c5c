"""TopicTable: topics, partition counts, topic ids, configs and log start offsets.

Persisted as one JSON file replaced atomically (write a temp file, fsync it, rename it over the
old one, fsync the directory), so a crash leaves either the old table or the new one.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(name)} characters, more than {MAX_TOPIC_LENGTH}"
    if not _LEGAL.match(name):
        return f"topic name '{name}' has characters outside [a-zA-Z0-9._-]"
    return None


@dataclass
class TopicRecord:
    name: str
    partitions: int
    topic_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    configs: dict[str, str] = field(default_factory=dict)
    log_start_offsets: dict[int, int] = field(default_factory=dict)  # only where advanced
    created_phy: int = 0  # CommitLog end at creation: older entries belong to a deleted namesake
    # compacted topics: where each partition's dirty part begins (Kafka's cleaner checkpoint)
    cleaned_offsets: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> TopicRecord:
        starts = {int(p): int(o) for p, o in data.get("log_start_offsets", {}).items()}
        cleaned = {int(p): int(o) for p, o in data.get("cleaned_offsets", {}).items()}
        return cls(data["name"], int(data["partitions"]), data["topic_id"],
                   dict(data.get("configs", {})), starts, int(data.get("created_phy", 0)),
                   cleaned)


class TopicTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicRecord] = {}
        self._by_id: dict[str, TopicRecord] | None = None  # rebuilt after every change

    def load(self) -> None:
        self._by_id = None
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.topics = {t["name"]: TopicRecord.from_json(t) for t in data.get("topics", [])}

    def save(self) -> None:
        """Persist the table; every change to ``topics`` ends with a save."""
        self._by_id = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": 1, "topics": [asdict(t) for t in self.topics.values()]},
                          indent=1, sort_keys=True)
        atomic_write(self.path, body.encode())

    def get(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def by_id(self, topic_id: str) -> TopicRecord | None:
        """Produce and Fetch v13+ name topics by id: a dict lookup, not a scan per request."""
        if self._by_id is None:
            self._by_id = {t.topic_id: t for t in self.topics.values()}
        return self._by_id.get(topic_id)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
