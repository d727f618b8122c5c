"""Bucketed counts of observations (durations, sizes) for a metrics endpoint to read.

Plain ints in a list, no lock: every observer runs on the event loop, and a reader there sees
a consistent state. ``observe`` is a bisect and two additions, cheap enough for every request.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

# seconds: an fdatasync of a few pages on an SSD up to a disk that hangs
FLUSH_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                         2.5, 5.0, 10.0)
# appends answered by one SYNC_FLUSH group commit
GROUP_COMMIT_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(slots=True)
class Histogram:
    bounds: tuple[float, ...]  # buckets' upper bounds (inclusive), ascending; +Inf is implied
    counts: list[int] = field(init=False)  # per bucket, not cumulative; the last is +Inf's
    total: float = 0.0  # the sum of the observed values

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)
