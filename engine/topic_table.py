"""TopicTable: topics, partition counts, topic ids, configs and log start offsets.

Persisted as one JSON file replaced atomically (write a temp file, fsync it, rename it over the
old one, fsync the directory), so a crash leaves either the old table or the new one.

``save`` writes on the caller's thread; ``save_off_loop`` writes on the table's one thread, so
the event loop goes on while a creation's directories are made and the file is synced. Every
save snapshots the table on the loop and numbers it: a snapshot older than the one on disk is
never written over it, so saves from both paths land in the loop's order. A creation or growth
under way is a record in ``pending``: written (so no save drops it), not yet in ``topics`` (so
no request sees it before it is on disk).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commitgate.engine.config import StoreConfig

log = logging.getLogger(__name__)

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


def cleanup_policy(topic: TopicRecord, config: StoreConfig) -> set[str]:
    """The topic's cleanup.policy (the broker's log.cleanup.policy when unset) as a set."""
    value = topic.configs.get("cleanup.policy", config.log_cleanup_policy)
    return {item.strip() for item in value.split(",") if item.strip()}


class TopicTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicRecord] = {}
        self.pending: dict[str, TopicRecord] = {}  # being created or grown: saved, not seen
        self._by_id: dict[str, TopicRecord] | None = None  # rebuilt after every change
        self._snapshots = 0  # numbers snapshots in the loop's order
        self._written = 0  # the number of the snapshot on disk
        self._write_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # made on first use
        self._closing = False

    def load(self) -> None:
        self._by_id = None
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.topics = {t["name"]: TopicRecord.from_json(t) for t in data.get("topics", [])}

    def save(self) -> None:
        """Persist the table; every change to ``topics`` ends with a save."""
        self._write(*self._snapshot())

    async def save_off_loop(self, work: Callable[[], None] | None = None) -> None:
        """``save`` on the table's thread, after ``work`` (file system work of the change, such
        as a new topic's directories). One thread: jobs run in the order they were asked for."""
        snapshot = self._snapshot()

        def job() -> None:
            if work is not None:
                work()
            self._write(*snapshot)

        await asyncio.get_running_loop().run_in_executor(self._thread(), job)

    def run_later(self, work: Callable[[], None]) -> None:
        """File system work nobody waits for (a deleted topic's files), on the table's thread
        after the jobs asked for before it; a failure is logged."""
        def job() -> None:
            if not self._closing:
                work()

        self._thread().submit(job).add_done_callback(_log_failure)

    def _thread(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="topic-table")
        return self._executor

    def publish(self, name: str) -> None:
        """Make the pending record of ``name`` seen, once it is on disk. A grown topic keeps its
        record object: the store's cleaners know a topic's incarnation by it."""
        record = self.pending.pop(name)
        current = self.topics.get(name)
        if current is None:
            self.topics[name] = record
        else:
            current.partitions = record.partitions
        self._by_id = None

    def partition_count(self) -> int:
        """Partitions of every topic, counting those being created or added."""
        return sum(t.partitions for t in {**self.topics, **self.pending}.values())

    def close(self) -> None:
        """Wait for the writes under way and stop the table's thread (removals not begun
        wait for the next start)."""
        self._closing = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _snapshot(self) -> tuple[int, bytes]:
        self._by_id = None
        self._snapshots += 1
        records = {**self.topics, **self.pending}
        body = json.dumps({"version": 1, "topics": [asdict(t) for t in records.values()]},
                          indent=1, sort_keys=True)
        return self._snapshots, body.encode()

    def _write(self, number: int, body: bytes) -> None:
        with self._write_lock:
            if number <= self._written:
                return  # a newer snapshot is on disk already
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, body)
            self._written = number

    def get(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def by_id(self, topic_id: str) -> TopicRecord | None:
        """Produce and Fetch v13+ name topics by id: a dict lookup, not a scan per request."""
        if self._by_id is None:
            self._by_id = {t.topic_id: t for t in self.topics.values()}
        return self._by_id.get(topic_id)


def _log_failure(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("topic table file work failed", exc_info=future.exception())


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
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
