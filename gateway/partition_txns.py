"""What each partition knows of transactions: the open ones, its last stable offset (LSO) and
its aborted transactions (Kafka's producer-state ongoing transactions and ``.txnindex``).

Fed by every append, live or replayed from the CommitLog at start (``ProducerStateManager.
record``), so it is rebuilt from the CommitLog as a ConsumeQueue is; kept in the producer-state
snapshot so that a start replays only the tail. A transactional batch opens the producer's
transaction in the partition at its base offset; a COMMIT or ABORT marker closes it, and an
ABORT records (producer, first offset, marker offset) for read_committed fetches. The LSO is
the first offset of the oldest open transaction, else the log end.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from commitgate.protocol.record_batch import CONTROL_ABORT

PartitionKey = tuple[str, int]  # topic id, partition


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(slots=True)
class PartitionTxns:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # in marker order


class PartitionTransactions:
    def __init__(self) -> None:
        self.partitions: dict[PartitionKey, PartitionTxns] = {}

    def _of(self, key: PartitionKey) -> PartitionTxns:
        state = self.partitions.get(key)
        if state is None:
            state = self.partitions[key] = PartitionTxns()
        return state

    def on_batch(self, key: PartitionKey, producer_id: int, base_offset: int) -> None:
        """A transactional data batch was appended."""
        self._of(key).open.setdefault(producer_id, base_offset)

    def on_marker(self, key: PartitionKey, producer_id: int, offset: int, kind: int) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was appended at ``offset``."""
        state = self._of(key)
        first = state.open.pop(producer_id, None)
        if kind == CONTROL_ABORT and first is not None:
            state.aborted.append(AbortedTxn(producer_id, first, offset))

    def first_open(self, key: PartitionKey) -> int | None:
        """The first offset of the partition's oldest open transaction, None if none is."""
        state = self.partitions.get(key)
        return min(state.open.values()) if state is not None and state.open else None

    def stable_offset(self, key: PartitionKey, log_end: int) -> int:
        first = self.first_open(key)
        return log_end if first is None else min(log_end, first)

    def is_open(self, key: PartitionKey, producer_id: int) -> bool:
        state = self.partitions.get(key)
        return state is not None and producer_id in state.open

    def open_producers(self, key: PartitionKey) -> dict[int, int]:
        state = self.partitions.get(key)
        return dict(state.open) if state else {}

    def is_aborted(self, key: PartitionKey, producer_id: int, offset: int) -> bool:
        """Whether the producer's batch at ``offset`` lies in one of its aborted transactions."""
        state = self.partitions.get(key)
        return state is not None and any(
            a.producer_id == producer_id and a.first_offset <= offset <= a.last_offset
            for a in state.aborted)

    def aborted_between(self, key: PartitionKey, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end): what a read_committed fetch of
        that range needs to drop them."""
        state = self.partitions.get(key)
        if state is None:
            return []
        return [a for a in state.aborted if a.last_offset >= start and a.first_offset < end]

    def trim(self, log_starts: Callable[[str, int], int | None]) -> bool:
        """Forget aborted transactions wholly below their partition's log start (retention
        or DeleteRecords took them); ``log_starts`` answers None for a deleted topic."""
        changed = False
        for key, state in self.partitions.items():
            start = log_starts(*key) if state.aborted else None
            if start is not None and state.aborted[0].last_offset < start:
                state.aborted = [a for a in state.aborted if a.last_offset >= start]
                changed = True
        return changed

    def add_aborted(self, key: PartitionKey, aborted: AbortedTxn) -> None:
        self._of(key).aborted.append(aborted)

    def retain(self, live: Iterable[str]) -> None:
        topics = set(live)
        for key in [k for k in self.partitions if k[0] not in topics]:
            del self.partitions[key]
