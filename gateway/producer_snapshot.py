"""The producer-state snapshot file: idempotent producers' state plus the CommitLog offset it covers.

One JSON document replaced atomically (temp file, fsync, rename, directory fsync), so a crash
leaves the old snapshot or the new one, never a torn one. At start the snapshot is loaded and
the CommitLog entries after ``covered`` are replayed on top of it. Unlike Kafka's snapshot,
which keeps only each producer's last batch, all five cached batches are kept, so a retry of
any of them is still recognised after a restart.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from engine.topic_table import atomic_write
from gateway.producer_state import BatchMetadata, Key, ProducerEntry, ProducerStateManager

log = logging.getLogger(__name__)

VERSION = 1


Snapshot = tuple[int, list[tuple[Key, int, tuple[BatchMetadata, ...]]]]  # covered, entries


def take(state: ProducerStateManager) -> Snapshot:
    """A copy of the state cheap enough for the event loop (the batch records are never
    changed once made, so copying each producer's deque is enough); encoding happens later."""
    return state.covered, [(key, entry.epoch, tuple(entry.batches))
                           for key, entry in state.entries.items()]


def encode(snapshot: Snapshot) -> bytes:
    covered, entries = snapshot
    producers = [[pid, topic_id, partition, epoch,
                  [[b.first_seq, b.last_seq, b.base_offset, b.offset_count, b.timestamp, b.phy_end]
                   for b in batches]]
                 for (pid, topic_id, partition), epoch, batches in entries]
    return json.dumps({"version": VERSION, "covered": covered, "producers": producers},
                      separators=(",", ":")).encode()


def decode(data: bytes) -> tuple[int, dict[Key, ProducerEntry]]:
    """(covered CommitLog offset, entries); raises ValueError on anything malformed."""
    try:
        doc = json.loads(data)
        if doc["version"] != VERSION:
            raise ValueError(f"snapshot version {doc['version']}, expected {VERSION}")
        entries = {}
        for pid, topic_id, partition, epoch, batches in doc["producers"]:
            entry = ProducerEntry(int(epoch))
            entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            if not entry.batches:
                raise ValueError(f"producer {pid} has no batches")
            entries[(int(pid), str(topic_id), int(partition))] = entry
        return int(doc["covered"]), entries
    except (KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError already
        raise ValueError(f"malformed snapshot: {exc!r}") from None


def write(path: Path, snapshot: Snapshot) -> None:
    """Encode and store; blocking (it fsyncs), so the broker runs it in a thread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, encode(snapshot))


def read(path: Path) -> tuple[int, dict[Key, ProducerEntry]] | None:
    """The snapshot, or None when there is none or it cannot be used (logged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read the producer state snapshot %s (%s)", path, exc)
        return None
    try:
        return decode(data)
    except ValueError as exc:
        log.warning("ignoring the producer state snapshot %s: %s", path, exc)
        return None
