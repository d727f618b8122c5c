"""The one interface through which the store touches the bytes of a stored batch.

The engine treats a CommitLog body as opaque. Where it must look inside (assigning the base
offset in place, checking the body checksum at recovery, reading keys for the IndexFile,
finding a record by timestamp) it calls a ``BodyFormat`` handed in by its owner. The Kafka
RecordBatch v2 implementation lives in ``protocol.record_batch``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol


class BodyFormat(Protocol):
    scanner: object | None
    """``keys`` in C for the IndexBuilder's CommitLog walk: a PyCapsule holding a
    ``body_scan_fn`` (native/body_scanner.h), or None to walk in Python."""

    def assign(self, body: memoryview, base_offset: int, log_append_time: int | None) -> None:
        """Write the broker-assigned base offset into a writable body, in place.

        With ``log_append_time`` set, also set the batch's timestamp type and max timestamp to
        it and recompute the checksum."""

    def stored_checksum(self, body: memoryview) -> int:
        """The checksum the body carries (CommitLog BODYCRC reuses it)."""

    def computed_checksum(self, body: memoryview) -> int:
        """The checksum computed over the body's covered bytes (recovery compares the two)."""

    def keys(self, body: memoryview) -> list[bytes]:
        """The non-null record keys in the body, in order, decompressing where needed (never hot
        path). A caller that has read them already hands the same list to
        ``MessageStore.append(keys=...)`` and the IndexBuilder does not call this for it."""

    def offset_for_timestamp(self, body: memoryview, timestamp: int, min_offset: int = 0
                             ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp`` whose offset is
        at least ``min_offset`` (a log start inside the batch), or None."""

    def max_timestamp_offset(self, body: memoryview) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, or None if empty."""

    def record_keys(self, body: memoryview) -> Iterator[tuple[int, bytes | None, bool, int]]:
        """(offset, key, is tombstone, timestamp) of every record (the log compactor's view;
        nothing for batches compaction must keep whole)."""

    def compact(self, body: memoryview, keep: Callable[[int, bytes | None, bool, int], bool]
                ) -> bytes | memoryview | None:
        """The body with only the records ``keep`` accepts (same offsets): ``body`` itself
        when all are kept, None when none is."""
