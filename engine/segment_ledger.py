"""SegmentLedger: how many bytes of each CommitLog segment are dead, kept as they die.

The CommitLogCleaner decides from these counts which segment to relocate or delete, so a pass
costs what died since the last one, not a walk of the whole CommitLog (4.4 us an entry: a
1 GiB segment of 1 KiB batches takes seconds). Live bytes of a segment = bytes written to it
- dead bytes. Entries die when a log start passes them (retention, DeleteRecords: the range is
noted here and walked by the cleaner's next pass, a slice at a time, off the request path),
when the cleaner or the compactor points their units at a copy, when a copy is never pointed
at, and at a segment's end filler. A deleted topic, a start, or a count found wrong makes the
ledger invalid, and the next pass walks every segment again.

The counts only steer: a segment is deleted only after a walk finds nothing live in it, and
relocating a segment that was still live costs a copy, nothing more.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class StartMove:
    """A partition's log start moved from ``old`` to ``new``: the batches between died."""

    topic: str
    partition: int
    old: int
    new: int
    incarnation: object  # the TopicRecord: a range of a deleted topic is dropped


@dataclass
class SegmentLedger:
    segment_bytes: int
    dead: dict[int, int] = field(default_factory=dict)  # segment start -> dead bytes
    valid: bool = False  # False: the next pass walks everything
    moves: list[StartMove] = field(default_factory=list)  # to walk at the next pass

    def segment_of(self, phy: int) -> int:
        return phy - phy % self.segment_bytes

    def died(self, phy: int, size: int) -> None:
        start = self.segment_of(phy)
        self.dead[start] = self.dead.get(start, 0) + size

    def live(self, start: int, written: int) -> int:
        return max(written - self.dead.get(start, 0), 0)

    def reset(self, lives: dict[int, tuple[int, int]]) -> None:
        """After a walk: each segment start -> (bytes written, live bytes)."""
        self.dead = {start: written - live for start, (written, live) in lives.items()}
        self.valid = True

    def forget(self, start: int) -> None:
        self.dead.pop(start, None)

    def invalidate(self) -> None:
        self.valid = False
