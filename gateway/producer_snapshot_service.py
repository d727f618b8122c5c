"""Keeps idempotent producers' state across restarts, clean or not.

At start the state is the last snapshot plus a replay of the batch headers stored after the
CommitLog offset it covers (only headers: producer id, epoch, sequences, offsets), so a retry
that arrives after a SIGKILL is still recognised. A snapshot that covers more than the
CommitLog holds after recovery (a torn tail was cut off) is discarded and the whole CommitLog
replayed. While the broker runs, a periodic task expires idle producers (Kafka's
producer.id.expiration.ms), forgets deleted topics and writes a snapshot when anything changed;
stopping writes a final one.

Retention: like Kafka since KIP-360, the state of a producer whose batches were all deleted
(retention, DeleteRecords) is kept until it expires, so its retries are still recognised.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from commitgate.engine import MessageStore
from commitgate.gateway import producer_snapshot
from commitgate.gateway.producer_state import ProducerStateManager
from commitgate.protocol.record_batch import HEADER_SIZE, control_type, read_header

log = logging.getLogger(__name__)


class ProducerSnapshotService:
    def __init__(self, path: Path, state: ProducerStateManager, store: MessageStore, *,
                 interval_ms: int, expiration_ms: int) -> None:
        self.path = path
        self.state = state
        self.store = store
        self.interval_s = interval_ms / 1000
        self.expiration_ms = expiration_ms
        self._written = -1  # ``covered`` of the last snapshot written
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---- start: snapshot + CommitLog replay -------------------------------------------------

    def restore(self) -> int:
        """Rebuild the state before the broker serves; returns the CommitLog entries replayed."""
        loaded = producer_snapshot.read(self.path)
        batches = None
        if loaded is not None:
            covered, entries, txns = loaded
            batches = self.store.iter_batches(covered)
            if batches is None:
                log.warning("the producer state snapshot covers the CommitLog up to %d, past its "
                            "end after recovery: rebuilding it from the whole CommitLog", covered)
            else:
                self.state.entries, self.state.covered = entries, covered
                self.state.txns = txns
                self._written = covered
        if batches is None:
            batches = self.store.iter_batches(0)
        replayed = 0
        for topic, partition, base_offset, body, end in batches:
            replayed += 1
            if len(body) >= HEADER_SIZE:
                header = read_header(body)
                control = control_type(body) if header.is_control else None
                self.state.record(self.store.topic(topic).topic_id, partition, header, base_offset,
                                  header.max_timestamp, end, control)
        self.state.retain_topics(t.topic_id for t in self.store.topics())
        self.state.expire(int(time.time() * 1000), self.expiration_ms)
        log.info("producer state: %d producer-partitions (%s, %d CommitLog entries replayed)",
                 len(self.state.entries), "from a snapshot" if self._written >= 0 else
                 "no usable snapshot", replayed)
        return replayed

    # ---- while running ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = self.store.supervisor.spawn("producer-snapshots", self._run,
                                                 stop=self._stop)

    async def stop(self) -> None:
        """Stop the task, then write the final snapshot (the broker serves no more requests)."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.round()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
            if self._stop.is_set():
                return
            await self.round()

    def _log_start(self, topic_id: str, partition: int) -> int | None:
        topic = self.store.table.by_id(topic_id)
        return None if topic is None else self.store.log_start_offset(topic.name, partition)

    async def round(self) -> bool:
        """Expire idle producers, forget deleted topics, snapshot if anything changed; whether
        the state is on disk. The CommitLog cleaner awaits it before it deletes a segment: a
        producer's batches may live there alone (compaction drops whole batches)."""
        state = self.state
        expired = state.expire(int(time.time() * 1000), self.expiration_ms)
        if expired:
            log.info("producer state: %d idle producer-partitions expired", expired)
        state.retain_topics(t.topic_id for t in self.store.topics())
        state.dirty |= state.txns.trim(self._log_start)
        if not state.dirty and state.covered == self._written:
            return True
        snapshot = producer_snapshot.take(state)  # on the loop; encoding and fsync in a thread
        state.dirty = False
        try:
            await asyncio.to_thread(producer_snapshot.write, self.path, snapshot)
        except OSError as exc:
            log.error("writing the producer state snapshot %s failed: %s", self.path, exc)
            state.dirty = True
            return False
        self._written = snapshot[0]
        return True
