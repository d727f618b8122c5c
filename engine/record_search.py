"""RecordSearch: the record-level part of a ListOffsets lookup by timestamp.

The store finds the batch to look into on the event loop (a binary search over the
ConsumeQueue units' running maximum of batch timestamps: no batch is read on the way); reading
its records (decompressing it) is ``run``, which the gateway hands to a thread. The body is a
view of the CommitLog mapping, which stays open while a view of it lives.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Found = tuple[int, int] | None  # (offset, timestamp)


@dataclass(slots=True)
class RecordSearch:
    body: memoryview | None  # the batch to decode; None: no record qualifies
    search: Callable[[memoryview], Found] | None = None
    next_offset: int | None = None  # the batch to try next when this one has no answer

    def run(self) -> Found:
        return None if self.body is None else self.search(self.body)


NOTHING = RecordSearch(None)
