"""StoreCheckpoint: how far each kind of file is known to be on disk.

Layout (big-endian, one 4 KiB page rewritten in place and fdatasync'd; the CRC detects a torn
write, and a bad page is treated as "nothing known", which recovery handles by scanning more):

    offset  size  field
    0       8     commitlog_flushed      CommitLog bytes below this are durable
    8       8     consumequeue_flushed   every entry below this phy has durable ConsumeQueue units
    16      8     index_flushed          every entry below this phy has durable IndexFile keys
    24      8     physic_msg_timestamp   ms when commitlog_flushed was taken
    32      8     logics_msg_timestamp   ms when consumequeue_flushed was taken
    40      8     index_msg_timestamp    ms when index_flushed was taken
    48      4     crc32                  zlib CRC-32 of bytes 0..47
"""
from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CHECKPOINT = struct.Struct(">qqqqqq")
CRC = struct.Struct(">I")
PAGE = 4096


@dataclass
class Checkpoint:
    commitlog_flushed: int = 0
    consumequeue_flushed: int = 0
    index_flushed: int = 0
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0

    def encode(self) -> bytes:
        fields = CHECKPOINT.pack(
            self.commitlog_flushed, self.consumequeue_flushed, self.index_flushed,
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        return (fields + CRC.pack(zlib.crc32(fields))).ljust(PAGE, b"\0")

    @classmethod
    def decode(cls, page: bytes) -> Checkpoint | None:
        if len(page) < CHECKPOINT.size + CRC.size:
            return None
        fields = page[: CHECKPOINT.size]
        if CRC.unpack_from(page, CHECKPOINT.size)[0] != zlib.crc32(fields):
            return None
        return cls(*CHECKPOINT.unpack(fields))


class StoreCheckpoint:
    """The checkpoint file; ``save`` may run on a flush thread, so it holds a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        existing = path.read_bytes() if path.exists() else b""
        decoded = Checkpoint.decode(existing)
        if existing and decoded is None:
            log.warning("checkpoint %s is damaged; recovery starts from the oldest data", path)
        self.value = decoded or Checkpoint()
        self.was_present = decoded is not None
        # Set when the store goes offline: what is on disk then is the last claim made, so
        # the next start re-verifies from there (saves after it may claim lost pages).
        self.frozen = False

    def save(self) -> None:
        with self._lock:
            if self.frozen:
                return
            page = self.value.encode()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, page, 0)
                os.fdatasync(fd)
            finally:
                os.close(fd)
