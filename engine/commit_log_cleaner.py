"""CommitLogCleaner: frees CommitLog segments whatever the partitions in them keep.

Retention only moves log start offsets; a segment goes once no live entry is left in it. An
entry is live while its topic (the incarnation that wrote it) exists, its batch ends above
its partition's log start and the partition's ConsumeQueue points at it. The oldest segment's
live entries are copied to the head of the CommitLog (same base offset and body, SYSFLAG
``RELOCATED``), the copies made durable, then the units repointed and their files synced, and
only then is the segment deleted: at every moment of a crash each unit points at an entry on
disk. The ConsumeQueues are the checkpoint: a copy whose units point at it makes the original
dead. See docs/architecture.md, "The log's lifecycle", for when relocation runs and why.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from commitgate.engine.commit_log import (
    BODY_LEN,
    BODY_LEN_AT,
    PREFIX_SIZE,
    RELOCATED,
    DispatchRequest,
)
from commitgate.engine.flush_consume_queue_service import syncfs
from commitgate.engine.mapped_file import MappedFile
from commitgate.engine.status import StoreStatus
from commitgate.engine.store_parts import StoreParts

log = logging.getLogger(__name__)

SLICE_S = 0.002  # the loop runs other work at least this often while the cleaner walks
CHUNK_BYTES = 8 << 20  # copies made durable (one fdatasync) before their units move: a sync
# also writes back the producers' dirty pages, so fewer of them cost appends less
SYNCFS_FROM = 64  # more touched ConsumeQueue files than this: one syncfs instead
# Under a full disk the oldest segment is relocated when it has this much garbage at least:
# copying a segment that is all live only moves the shortage.
PRESSURE_MIN_GARBAGE = 0.1
# An oldest segment this little of which is live is relocated whatever the totals: a copy of
# a tenth frees the other nine (a few commits of a long-lived topic in every segment).
CHEAP_MAX_LIVE = 0.1


@dataclass(slots=True)
class CleanerStats:
    relocated_entries: int = 0
    relocated_bytes: int = 0
    deleted_segments: int = 0


class CommitLogCleaner:
    def __init__(self, parts: StoreParts) -> None:
        self._parts = parts
        self._logs = parts.logs
        self._commit_log = parts.logs.commit_log
        self._factor = parts.config.cleaner_garbage_factor
        self._rate = parts.config.cleaner_io_max_bytes_per_second
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="commitlog-cleaner")
        self._zombies: list[MappedFile] = []  # deleted segments still read by responses
        self.stopping = False
        self.stats = CleanerStats()
        self.start_pass()

    def close(self) -> None:
        self.stopping = True
        self._executor.shutdown(wait=True)

    # ---- liveness -------------------------------------------------------------------------

    def is_live(self, req: DispatchRequest) -> bool:
        logs = self._logs
        topic = logs.table.topics.get(req.topic)
        if topic is None or not 0 <= req.partition < topic.partitions or \
                req.phy_offset < topic.created_phy:
            return False
        queue = logs.queues.get(req.topic, req.partition)
        first = max(req.queue_offset, logs.log_start_offset(req.topic, req.partition))
        if first >= min(req.queue_offset + req.offset_count, queue.max_offset):
            return False
        return queue.get(first)[0] == req.phy_offset

    async def live_bytes(self, mapped: MappedFile) -> int:
        """Bytes of the live entries in one segment (a walk of its entries)."""
        return sum([req.size async for req in self._live_entries(mapped)])

    async def _live_entries(self, mapped: MappedFile) -> AsyncIterator[DispatchRequest]:
        """The live entries of one segment, letting the loop run every SLICE_S. Liveness only
        ever ends (log starts move forward, units move away, topics go), so an entry found
        dead stays dead while the walk waits."""
        deadline = time.monotonic() + SLICE_S
        for req in self._entries(mapped):
            if self.is_live(req):
                yield req
            if time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + SLICE_S

    def _entries(self, mapped: MappedFile) -> Iterator[DispatchRequest]:
        commit_log = self._commit_log
        end = min(mapped.end_offset, commit_log.max_offset)
        for req in commit_log.iter_entries(mapped.start_offset, check_crc=False):
            if req.phy_offset >= end:
                return
            yield req

    # ---- accounting -------------------------------------------------------------------------

    async def _account(self) -> None:
        """Bring the ledger up to date: walk the batches whose log start passed them (and
        delete the ConsumeQueue files wholly below), or every segment when it is invalid."""
        logs, ledger = self._logs, self._commit_log.ledger
        moves, ledger.moves = ledger.moves, []
        deadline = time.monotonic() + SLICE_S
        for move in moves:
            if logs.table.get(move.topic) is not move.incarnation:
                continue  # deleted: the ledger was invalidated with it
            queue = logs.queues.get(move.topic, move.partition)
            if ledger.valid:
                for entry, after in logs.batch_entries(queue, move.old, move.new):
                    if after <= move.new:
                        ledger.died(int.from_bytes(entry[28:36], "big"), len(entry))
                    if time.monotonic() >= deadline:
                        await asyncio.sleep(0)
                        deadline = time.monotonic() + SLICE_S
            queue.delete_files_below(move.new)  # a later move of it walks from here
        if not ledger.valid:
            ledger.reset(await self._walk_all())

    async def _walk_all(self) -> dict[int, tuple[int, int]]:
        """Each segment's (bytes written, live bytes), walked a slice at a time."""
        lives = {}
        for mapped in list(self._commit_log.queue.files):
            written = min(mapped.end_offset, self._commit_log.max_offset) - mapped.start_offset
            lives[mapped.start_offset] = (written, await self.live_bytes(mapped))
        return lives

    def _live_estimate(self, mapped: MappedFile) -> int:
        written = min(mapped.end_offset, self._commit_log.max_offset) - mapped.start_offset
        return self._commit_log.ledger.live(mapped.start_offset, written)

    # ---- deletion ---------------------------------------------------------------------------

    async def delete_dead_segments(self) -> int:
        """Delete the oldest segments while they hold nothing live (the ledger says so, and a
        walk agrees); returns how many."""
        files = self._commit_log.queue.files
        deleted = 0
        while len(files) > 1 and not self.stopping and self._live_estimate(files[0]) == 0:
            oldest = files[0]
            live = await self.live_bytes(oldest)
            if live:  # the ledger missed some: correct it, relocation will see to the rest
                log.warning("cleaner: %s holds %d live bytes the ledger did not count",
                            oldest.path, live)
                self._commit_log.ledger.dead[oldest.start_offset] = oldest.size - live
                break
            if not await self._delete_oldest():
                break
            deleted += 1
        self._zombies = [mapped for mapped in self._zombies if not mapped.close()]
        return deleted

    async def _delete_oldest(self) -> bool:
        """Forget the oldest segment, then unlink and unmap it on the cleaner's thread (6 ms
        for 16 MiB on the loop); False when a ``before_segment_delete`` hook could not save
        what it keeps."""
        commit_log = self._commit_log
        for hook in self._parts.before_segment_delete:
            if not await hook():
                log.warning("cleaner: %s kept: state rebuilt from the CommitLog could not be "
                            "saved first", commit_log.queue.files[0].path)
                return False
        mapped = commit_log.queue.files.pop(0)
        log.info("cleaner: deleting CommitLog segment %s", mapped.path)
        commit_log.ledger.forget(mapped.start_offset)
        self._parts.index.service.delete_files_below(commit_log.min_offset)
        self.stats.deleted_segments += 1
        loop = asyncio.get_running_loop()
        if not await loop.run_in_executor(self._executor, mapped.destroy):
            self._zombies.append(mapped)
        return True

    # ---- relocation -------------------------------------------------------------------------

    async def clean(self, *, pressure: bool) -> int:
        """Delete dead segments, then relocate the oldest while the CommitLog holds more than
        the garbage factor times its live bytes, while the oldest is at most CHEAP_MAX_LIVE
        live, or, under ``pressure`` (a full disk), while the oldest has PRESSURE_MIN_GARBAGE
        of garbage. Returns how many segments went."""
        await self._account()
        deleted = await self.delete_dead_segments()
        files = self._commit_log.queue.files
        for _ in range(len(files)):
            if self.stopping or len(files) < 2:
                break
            oldest = files[0]
            live = sum(self._live_estimate(mapped) for mapped in files)
            share = self._live_estimate(oldest) / oldest.size
            over = len(files) * oldest.size > self._factor * live
            if not (over or share <= CHEAP_MAX_LIVE or
                    (pressure and 1 - share >= PRESSURE_MIN_GARBAGE)):
                break
            if not await self._relocate(oldest):
                break
            # every entry live when the walk met it moved, and liveness never comes back
            if not await self._delete_oldest():
                break
            deleted += 1 + await self.delete_dead_segments()
        return deleted

    async def _relocate(self, mapped: MappedFile) -> bool:
        """Copy the live entries of ``mapped`` (the oldest segment) to the head and repoint
        their units; True when all of them moved."""
        log.info("cleaner: relocating the live entries of %s", mapped.path)
        touched: set[Path] = set()
        chunk: list[tuple[DispatchRequest, int]] = []
        chunk_bytes = 0
        async for req in self._live_entries(mapped):
            new_phy = self._copy(req)
            if new_phy is None:
                return False
            chunk.append((req, new_phy))
            chunk_bytes += req.size
            if chunk_bytes >= CHUNK_BYTES:
                if not await self._commit(chunk, touched):
                    return False
                await self.throttle(chunk_bytes)
                chunk, chunk_bytes = [], 0
                if self.stopping:
                    return False
        if not await self._commit(chunk, touched):
            return False
        await self.throttle(chunk_bytes)
        return await self.sync_queue_files(touched)

    def _copy(self, req: DispatchRequest) -> int | None:
        """Append a copy of ``req``'s entry to the head; its CommitLog offset, or None."""
        copy = self.copy_entry(req)
        return None if copy is None else copy[0]

    def copy_entry(self, req: DispatchRequest, body: bytes | None = None
                   ) -> tuple[int, int] | None:
        """Append a copy (SYSFLAG RELOCATED, naming its source) of the entry ``req`` decodes,
        with ``body`` in place of its batch when given (the compactor's rewrite): the copy's
        (phy, size), or None when the disk refused it (logged)."""
        commit_log = self._commit_log
        entry = commit_log.entry(req.phy_offset, req.size)
        (body_len,) = BODY_LEN.unpack_from(entry, BODY_LEN_AT)
        born_host = int.from_bytes(entry[48:56], "big", signed=True)
        copy = DispatchRequest(req.topic, req.partition, req.queue_offset, req.offset_count, 0, 0,
                               req.max_timestamp, req.store_timestamp, req.sys_flag | RELOCATED,
                               req.phy_offset)
        new_body = entry[PREFIX_SIZE : PREFIX_SIZE + body_len] if body is None else \
            memoryview(bytearray(body))
        try:
            commit_log.append_copy(copy, new_body, bytes(entry[PREFIX_SIZE + body_len :]),
                                   born_host, self._parts.store_host)
        except OSError as exc:
            log.error("cleaner: copying %s-%d offset %d (CommitLog %d) failed: %s", req.topic,
                      req.partition, req.queue_offset, req.phy_offset, exc)
            return None
        # Nothing waits to be dispatched: the copy needs no units of its own, and the
        # IndexFile builder, which follows this mark, indexes its keys again.
        self._parts.dispatcher.dispatched_offset = commit_log.max_offset
        return copy.phy_offset, copy.size

    async def _commit(self, chunk: list[tuple[DispatchRequest, int]], touched: set[Path]
                      ) -> bool:
        """Make a chunk of copies durable, then point their units at them."""
        if not chunk:
            return True
        logs = self._logs
        ledger = self._commit_log.ledger
        status = await self._parts.flush_service.sync_to(self._commit_log.max_offset)
        if status is not StoreStatus.OK:
            log.error("cleaner: the CommitLog copies could not be synced (%s)", status.value)
            for req, new_phy in chunk:
                ledger.died(new_phy, req.size)
            return False
        deadline = time.monotonic() + SLICE_S
        for req, new_phy in chunk:
            if time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + SLICE_S
            topic = logs.table.topics.get(req.topic)
            if topic is None or req.partition >= topic.partitions:
                ledger.died(new_phy, req.size)
                continue  # deleted while the copies were synced: nothing to point
            queue = logs.queues.get(req.topic, req.partition)
            try:
                files = queue.repoint(req.queue_offset, req.offset_count, req.phy_offset,
                                      new_phy, req.size)
            except OSError as exc:
                log.error("cleaner: repointing %s-%d offset %d failed: %s", req.topic,
                          req.partition, req.queue_offset, exc)
                return False
            if not files:  # the units moved on meanwhile: the copy is garbage
                ledger.died(new_phy, req.size)
                continue
            touched.update(files)
            ledger.died(req.phy_offset, req.size)
            self.stats.relocated_entries += 1
            self.stats.relocated_bytes += req.size
        return True

    async def sync_queue_files(self, paths: set[Path]) -> bool:
        """fdatasync the ConsumeQueue files the repointed units went to."""
        if not paths:
            return True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, _sync_paths, sorted(paths))
        except OSError as exc:  # a later sync may claim what this one lost: the store goes
            self._parts.take_offline(f"the cleaner's fdatasync of {len(paths)} ConsumeQueue "
                                     f"files", exc)
            return False
        return True

    def start_pass(self) -> None:
        """A retention pass begins: the I/O rate is kept over the whole pass."""
        self._pass_started, self._pass_written = time.monotonic(), 0

    async def throttle(self, written: int) -> None:
        """After ``written`` more bytes of copies, sleep as long as the pass ran ahead of
        ``log.cleaner.io.max.bytes.per.second`` (relocation and compaction alike)."""
        self._pass_written += written
        ahead = self._pass_written / self._rate - (time.monotonic() - self._pass_started)
        await asyncio.sleep(max(ahead, 0))


def _sync_paths(paths: list[Path]) -> None:
    if len(paths) > SYNCFS_FROM:
        syncfs(paths[0].parent)
        return
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
