"""What the request path counts for ``/metrics`` (``Broker.metrics``), below the broker that
owns it and the admin exporter that reads it (``gateway/admin/metrics.py``).

The request path only adds to plain ints: the event loop is their one writer, so there is no
lock, and the counts are those the handlers have anyway (a batch's size and record count, a
fetch's buffers), never a walk over records.
"""
from __future__ import annotations

import collections
import functools
import struct
import time
from collections.abc import Iterable

from commitgate.engine.histogram import Histogram
from commitgate.protocol.record_batch import BASE_OFFSET

# seconds from a request's last byte read to its response written: Fetch long-polls for up to
# its max_wait_ms (500 by default), JoinGroup waits for a rebalance. Every bucket is a line of
# every API's histogram in each scrape, and the lines are most of a scrape's cost.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
# a batch's lastOffsetDelta (protocol.record_batch.HEADER); two fields unpacked, not the header
LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23


class RequestMetrics:
    """Per API and per topic: latency, error codes, bytes and records."""

    def __init__(self) -> None:
        # API name -> seconds (its count: the requests)
        self.latency: dict[str, Histogram] = collections.defaultdict(
            functools.partial(Histogram, LATENCY_BUCKETS))
        self.errors: collections.Counter[tuple[str, int]] = collections.Counter()
        # topic -> [bytes, records], appended by Produce and returned by Fetch
        self.produced: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        self.fetched: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])

    def answered(self, api: str, received: float, code: int) -> None:
        """A response written (``code``: its top-level error) for a request read at
        ``received`` (time.monotonic)."""
        self.latency[api].observe(time.monotonic() - received)
        if code:
            self.errors[api, code] += 1

    def partition_errors(self, api: str, codes: Iterable[int]) -> None:
        for code in codes:
            if code:
                self.errors[api, code] += 1

    def on_produce(self, topic: str, size: int, records: int) -> None:
        """A batch appended."""
        counts = self.produced[topic]
        counts[0] += size
        counts[1] += records

    def on_fetch(self, names: list[str | None], topics: list, sizes: list[int]) -> None:
        """A Fetch response's topics, with their names and the bytes of the batches returned
        in each, in the same order: those bytes, the offsets the batches span (their records,
        counting any that compaction removed from a batch), and per-partition errors."""
        for name, topic, size in zip(names, topics, sizes):
            counts = None
            if size:
                counts = self.fetched[name]
                counts[0] += size
            for part in topic.partitions:
                if part.error_code:
                    self.errors["Fetch", part.error_code] += 1
                elif counts is not None and part.records:  # the batches read, as buffers
                    counts[1] += _offsets_spanned(part.records)

    def forget_topics(self, known: Iterable[str]) -> None:
        """Drop the counts of deleted topics (as Kafka removes their metrics)."""
        known = set(known)
        for table in (self.produced, self.fetched):
            for name in [name for name in table if name not in known]:
                del table[name]


def _offsets_spanned(batches: list[memoryview]) -> int:
    first = BASE_OFFSET.unpack_from(batches[0])[0]
    last = batches[-1]
    end = BASE_OFFSET.unpack_from(last)[0] + LAST_OFFSET_DELTA.unpack_from(
        last, LAST_OFFSET_DELTA_AT)[0] + 1
    return end - first
