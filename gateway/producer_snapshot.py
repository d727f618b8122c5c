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

from commitgate.engine.topic_table import atomic_write
from commitgate.gateway.partition_txns import AbortedTxn, PartitionTransactions
from commitgate.gateway.producer_state import (
    BatchMetadata,
    Key,
    ProducerEntry,
    ProducerStateManager,
)

log = logging.getLogger(__name__)

VERSION = 2  # 2 added the partitions' open and aborted transactions; 1 is still read


# open: (topic id, partition, producer id, first offset); aborted: the same + marker offset
Txns = tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int, int]]]
Snapshot = tuple[int, list[tuple[Key, int, tuple[BatchMetadata, ...]]], Txns]
Loaded = tuple[int, dict[Key, ProducerEntry], PartitionTransactions]


def take(state: ProducerStateManager) -> Snapshot:
    """A copy of the state cheap enough for the event loop (the batch records are never
    changed once made, so copying each producer's deque is enough); encoding happens later."""
    parts = state.txns.partitions.items()
    txns = ([(t, p, pid, first) for (t, p), s in parts for pid, first in s.open.items()],
            [(t, p, *a) for (t, p), s in parts for a in s.aborted])
    return state.covered, [(key, entry.epoch, tuple(entry.batches))
                           for key, entry in state.entries.items()], txns


def encode(snapshot: Snapshot) -> bytes:
    covered, entries, (open_txns, aborted) = snapshot
    producers = [[pid, topic_id, partition, epoch,
                  [[b.first_seq, b.last_seq, b.base_offset, b.offset_count, b.timestamp, b.phy_end]
                   for b in batches]]
                 for (pid, topic_id, partition), epoch, batches in entries]
    return json.dumps({"version": VERSION, "covered": covered, "producers": producers,
                       "open_txns": open_txns, "aborted_txns": aborted},
                      separators=(",", ":")).encode()


def decode(data: bytes) -> Loaded:
    """(covered CommitLog offset, entries, transactions); raises ValueError on anything
    malformed."""
    try:
        doc = json.loads(data)
        if doc["version"] not in (1, VERSION):
            raise ValueError(f"snapshot version {doc['version']}, expected {VERSION}")
        entries = {}
        for pid, topic_id, partition, epoch, batches in doc["producers"]:
            entry = ProducerEntry(int(epoch))
            entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            entries[(int(pid), str(topic_id), int(partition))] = entry
        txns = PartitionTransactions()
        for topic_id, partition, pid, first in doc.get("open_txns", ()):
            txns.on_batch((str(topic_id), int(partition)), int(pid), int(first))
        for topic_id, partition, pid, first, last in doc.get("aborted_txns", ()):
            txns.add_aborted((str(topic_id), int(partition)),
                             AbortedTxn(int(pid), int(first), int(last)))
        return int(doc["covered"]), entries, txns
    except (KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError already
        raise ValueError(f"malformed snapshot: {exc!r}") from None


def write(path: Path, snapshot: Snapshot) -> None:
    """Encode and store; blocking (it fsyncs), so the broker runs it in a thread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, encode(snapshot))


def read(path: Path) -> Loaded | None:
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
