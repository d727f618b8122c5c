"""IndexBuilder: a worker thread that follows the CommitLog and feeds the IndexFiles.

Keys live inside records, possibly compressed, so indexing stays off the append path: the
worker reads entries behind the dispatcher, asks the BodyFormat for their keys and puts
``topic#key`` into the IndexService. An append that already read its entry's keys (the gateway
validates every compressed batch by decompressing it) hands them over (``KeyHandoff``), so that
the worker does not decompress the entry a second time; the CommitLog cleaner's copies and
recovery's replays hand nothing over. It may lag; ``index_flushed`` in the checkpoint says how
far the IndexFiles are on disk, and after a restart it resumes from there (a key indexed twice
is harmless: lookups drop duplicate hits). A failed fdatasync of an IndexFile does not stop the
store (lookups check every hit against the CommitLog): ``index_flushed`` stays where it was,
so the next start re-indexes from there, and nothing is synced again in this run (a later sync
that succeeds could claim pages the kernel dropped).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from array import array
from collections import deque
from pathlib import Path

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import CommitLog
from commitgate.engine.config import StoreConfig
from commitgate.engine.index_file import IndexService
from commitgate.engine.supervision import Supervisor, TaskHealth
from commitgate.native import c_helpers

# None without the C helper: entries are then walked in Python
_follow = c_helpers.pick("engine._commit_log", "follow", None)

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 1.0
# Without the C walk (or before the first segment exists) the worker polls rather than being
# woken by every append; a long poll leaves a poll's worth of entries to catch up when the
# appends stop (100 ms: 3-4 us per 64 KiB append in the store benchmark). Lookups nudge it.
POLL_INTERVAL_S = 0.01
ENTRIES_PER_ROUND = 4096
CATCH_UP_TIMEOUT_S = 2.0
STALL_RETRY_S = 1.0
CATCH_UP_POLL_S = 0.0005  # the C walk is at most one FOLLOW_POLL_US behind
STOP_LIMIT, STOP_BLANK, STOP_INVALID = 0, 1, 2
# The C walk follows the appends by itself (engine._commit_log.follow): it polls this often
# without the GIL and comes back to Python for keys, a segment's end, the stop flag or the
# index flush. 5 ms: up to ~15 MiB behind 3 GB/s of appends (1 ms measured no better in the
# store benchmark, and an idle broker would wake 1,000 times a second).
FOLLOW_POLL_US = 5000
WAKE, PUBLISHED = 0, 1  # the control cells: "return now", and how far a keyless walk got
# Keys handed over by appends wait for the worker, which may lag far behind (a full disk stalls
# it): at most this many entries and bytes of keys (about 16 MiB of 1 KiB compressed records'
# short keys is ~300 entries of 1 MiB batches), then appends hand nothing over and the worker
# decompresses their entries itself.
HANDOFF_MAX_ENTRIES = 4096
HANDOFF_MAX_BYTES = 16 * 1024 * 1024
KEY_OVERHEAD = 48  # bytes a handed-over key takes beyond its own: its bytes object, a list slot


class KeyHandoff:
    """Keys appends already read, by CommitLog position, until the worker indexes the entry.

    Positions come in ascending order (appends go to the CommitLog end, and an undone append
    drops its position before the CommitLog end moves back), so the worker drops what it walked
    past without taking (entries it skipped) from the front. The appending loop and the worker
    thread share it under a lock, taken once an entry."""

    def __init__(self, max_entries: int = HANDOFF_MAX_ENTRIES,
                 max_bytes: int = HANDOFF_MAX_BYTES) -> None:
        self._max_entries, self._max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()
        self._waiting: deque[tuple[int, list[bytes], int]] = deque()  # position, keys, cost
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def room(self) -> int:
        """Bytes of keys the next entry may hand over (0: full; the worker only frees room)."""
        if len(self._waiting) >= self._max_entries:
            return 0
        return max(0, self._max_bytes - self._bytes)

    def put(self, position: int, keys: list[bytes]) -> None:
        """The keys of the entry at ``position``, before it is dispatched (the worker never
        walks past the dispatched end); dropped when they do not fit."""
        cost = sum(map(len, keys)) + KEY_OVERHEAD * len(keys)
        with self._lock:
            if len(self._waiting) < self._max_entries and self._bytes + cost <= self._max_bytes:
                self._waiting.append((position, keys, cost))
                self._bytes += cost

    def take(self, position: int) -> list[bytes] | None:
        """The keys handed over for ``position``, or None; drops those of positions below."""
        waiting = self._waiting
        with self._lock:
            while waiting and waiting[0][0] <= position:
                at, keys, cost = waiting.popleft()
                self._bytes -= cost
                if at == position:
                    return keys
        return None

    def drop_from(self, position: int) -> None:
        """An undone append: the CommitLog reuses ``position`` for the next entry."""
        waiting = self._waiting
        with self._lock:
            while waiting and waiting[-1][0] >= position:
                self._bytes -= waiting.pop()[2]


class IndexBuilder:
    def __init__(self, directory: Path, commit_log: CommitLog, body_format: BodyFormat,
                 checkpoint: StoreCheckpoint, config: StoreConfig, dispatched_cell: array
                 ) -> None:
        self.enabled = config.index_enable
        self.service = IndexService(directory, config.index_hash_slots, config.index_max_entries)
        self._commit_log = commit_log
        self._body_format = body_format
        self._checkpoint = checkpoint
        self._end_cell = dispatched_cell  # the Dispatcher's: how far the CommitLog is dispatched
        self._control = array("q", [0, 0])  # WAKE, PUBLISHED (read by the C walk without the GIL)
        self._stop = threading.Event()
        self._nudge = threading.Event()  # a lookup waits: index now, not at the next poll
        self._thread: threading.Thread | None = None
        self.position = 0  # the next CommitLog offset to index
        self._stalled = False
        self._flush_failed = False
        self._health: TaskHealth | None = None
        self._flushed_position = 0
        scanner = getattr(body_format, "scanner", None)
        self._scanner = scanner if _follow is not None else None
        self.handoff = KeyHandoff()

    def start(self, supervisor: Supervisor) -> None:
        """Run the worker thread under ``supervisor`` (restarted if it raises)."""
        if not self.enabled:
            return
        self.service.load()
        resume = self.service.truncate_after(self._commit_log.max_offset)
        start = min(self._checkpoint.value.index_flushed, resume)
        self.position = self._flushed_position = max(start, self._commit_log.min_offset)
        self._control[WAKE], self._control[PUBLISHED] = 0, self.position
        self._thread = supervisor.thread("index-builder", self._run, self._stop)
        self._health = supervisor.tasks["index-builder"]

    @property
    def key_room(self) -> int:
        """Bytes of keys an append may hand over (``hand_over``); 0 when not running."""
        return self.handoff.room if self._thread is not None else 0

    def hand_over(self, position: int, keys: list[bytes]) -> None:
        """Keys of the entry appended at ``position``, exactly as ``BodyFormat.keys`` gives
        them; called before it is dispatched."""
        if self._thread is not None:
            self.handoff.put(position, keys)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._nudge.set()
        self._control[WAKE] = 1
        self._thread.join()
        self._flush()
        self.service.close()

    def query(self, key: bytes, begin_ms: int, end_ms: int, max_count: int) -> list[int]:
        """CommitLog offsets of entries whose keys hash like ``key``, newest first, no repeats."""
        if not self.enabled:
            return []
        return list(dict.fromkeys(self.service.query(key, begin_ms, end_ms, max_count)))

    async def catch_up(self, position: int) -> None:
        """Return once everything below ``position`` is indexed, or after a bounded wait (a
        lookup then answers from what is indexed so far)."""
        if self._thread is None:
            return
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.indexed < position and time.monotonic() < deadline:
            self._nudge.set()
            await asyncio.sleep(CATCH_UP_POLL_S)

    @property
    def lag_bytes(self) -> int:
        """Bytes dispatched but not indexed yet; 0 when the builder is not running."""
        if self._thread is None:
            return 0
        return max(0, self._end_cell[0] - self.indexed)

    @property
    def indexed(self) -> int:
        """Everything below is indexed: the position, or further where the C walk published a
        keyless stretch it is still on."""
        return max(self.position, self._control[PUBLISHED])

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stop.is_set():
            budget = max(0.0, last_flush + FLUSH_INTERVAL_S - time.monotonic())
            if not self._index_some_or_stall(budget):
                self._nudge.wait(POLL_INTERVAL_S)
                self._nudge.clear()
            if time.monotonic() - last_flush >= FLUSH_INTERVAL_S:
                self._flush()
                last_flush = time.monotonic()

    def _index_some_or_stall(self, budget_s: float) -> bool:
        """A write error (a full disk) stalls the index at the failed entry and retries it
        later: skipping would lose the entry's keys for good."""
        try:
            progressed = self._index_some(budget_s)
        except OSError as exc:
            if not self._stalled:
                log.error("index: stalled at CommitLog offset %d, retrying every %.0f s: %s",
                          self.position, STALL_RETRY_S, exc)
            self._stalled = True
            self._stop.wait(STALL_RETRY_S)
            return False
        if self._stalled:
            log.warning("index: resumed at CommitLog offset %d", self.position)
            self._stalled = False
        return progressed

    def _index_some(self, budget_s: float) -> bool:
        """Index up to a round of entries (the C walk: for up to ``budget_s``); False when
        caught up."""
        end = self._end_cell[0]
        if self._scanner is not None:
            return self._walk_some(end, budget_s)
        for _ in range(ENTRIES_PER_ROUND):
            if self.position >= end:
                return False
            self.position = max(self.position, self._commit_log.min_offset)
            req, size = self._commit_log.decode(self.position, check_crc=False)
            if size == 0:
                return self._skip_invalid(end)
            if req is not None:
                self._index_entry(req.topic, req.partition, req.store_timestamp,
                                  self._commit_log.body(self.position, size))
            self.position += size
        return True

    def _walk_some(self, end: int, budget_s: float) -> bool:
        """The C walk over one segment, following the appends for up to ``budget_s``; the
        GIL is held only for the entries with keys (and those whose bodies need the Python
        path)."""
        self.position = max(self.position, self._commit_log.min_offset)
        mapped = self._commit_log.queue.find(self.position)
        if self.position >= end and mapped is None:
            return False  # nothing to follow yet: the next segment does not exist
        if mapped is None:
            return self._skip_invalid(end)
        start = self.position - mapped.start_offset
        view = mapped.view()  # pins the mapping: retention cannot close it under the walk
        walked, stop, found = _follow(view, start, mapped.start_offset, self._scanner,
                                      self._end_cell, self._control, FOLLOW_POLL_US,
                                      int(budget_s * 1e6))
        if walked == start and stop == STOP_LIMIT and mapped.start_offset + walked >= end:
            return False  # caught up: nothing came within the budget
        del view
        for at, size, partition, store_timestamp, topic, keys in found:
            self.position = mapped.start_offset + at
            self._index_found(topic, partition, store_timestamp, size, keys)
        self.position = mapped.start_offset + walked
        if stop == STOP_BLANK or (stop == STOP_LIMIT and walked == start):
            return self._step_one(end)  # a segment's filler, or what the walk cannot read
        if stop == STOP_INVALID:
            return self._skip_invalid(end)
        return True

    def _index_found(self, topic: bytes, partition: int, store_timestamp: int, size: int,
                     keys: list[bytes] | None) -> None:
        try:
            name = topic.decode()
        except UnicodeDecodeError:
            log.warning("index: skipping the entry at CommitLog offset %d: topic not UTF-8",
                        self.position)
            return
        if keys is None:  # left to the Python path (compressed, or the scan refused it)
            self._index_entry(name, partition, store_timestamp,
                              self._commit_log.body(self.position, size))
        else:
            self._put(name, keys, store_timestamp)

    def _step_one(self, end: int) -> bool:
        """Step over the entry at the position as the Python walk does (a BLANK filler)."""
        _, size = self._commit_log.decode(self.position, check_crc=False)
        if size == 0:
            return self._skip_invalid(end)
        self.position += size
        return True

    def _skip_invalid(self, end: int) -> bool:
        lowest = self._commit_log.min_offset
        if self.position < lowest:  # the cleaner deleted the segment under the walk
            self.position = lowest
            return True
        log.error("index: no valid CommitLog entry at %d below the dispatched end %d; "
                  "skipping to it", self.position, end)
        self.position = end
        return False

    def _index_entry(self, topic: str, partition: int, store_timestamp: int, body: memoryview
                     ) -> None:
        keys = self.handoff.take(self.position)
        if keys is not None:
            self._put(topic, keys, store_timestamp)
            return
        try:
            keys = self._body_format.keys(body)
        except Exception as exc:  # noqa: BLE001 - a batch we cannot read must not stop the index
            log.warning("index: skipping %s-%d entry at CommitLog offset %d: %s", topic,
                        partition, self.position, exc)
            return
        self._put(topic, keys, store_timestamp)

    def _put(self, topic: str, keys: list[bytes], store_timestamp: int) -> None:
        if keys:  # an OSError here stalls the index (see _index_some_or_stall)
            prefix = topic.encode() + b"#"
            self.service.put_keys([prefix + key for key in keys], self.position, store_timestamp)

    def _flush(self) -> None:
        if self._flush_failed:
            return
        position = self.position
        try:
            self.service.flush()
        except OSError as exc:
            self._flush_failed = True
            if self._health is not None:
                self._health.failed(exc)
            log.error("index: fdatasync of the IndexFiles failed: %s; no more IndexFile syncs "
                      "until a restart, which re-indexes from CommitLog offset %d", exc,
                      self._flushed_position)
            return
        self._flushed_position = position
        value = self._checkpoint.value
        value.index_flushed, value.index_msg_timestamp = position, int(time.time() * 1000)
