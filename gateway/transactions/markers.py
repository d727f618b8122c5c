"""Transaction markers: the COMMIT or ABORT control batch the coordinator writes into every
partition of a finished transaction (Kafka's WriteTxnMarkers, inside the one broker).

A marker goes through the same CommitLog path as a produced batch and is fed to the producer
state like one, which closes the producer's transaction in the partition (its LSO moves on;
an ABORT is added to the aborted-transactions index). For a ``__consumer_offsets`` partition
the group coordinator writes the marker itself and applies or drops the pending offsets.
Markers are idempotent for readers: a second marker for a transaction already closed in a
partition changes nothing, so a retry after a partial failure may repeat some.
"""
from __future__ import annotations

import logging
import time

from commitgate.engine import MessageStore, StoreStatus
from commitgate.gateway.groups.offsets import OffsetManager
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC
from commitgate.gateway.producer_state import ProducerStateManager
from commitgate.gateway.transactions.txn_log import TxnRecord
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    build_control_batch,
    read_header,
)

log = logging.getLogger(__name__)


class MarkerWriter:
    def __init__(self, store: MessageStore, producers: ProducerStateManager,
                 offsets: OffsetManager) -> None:
        self.store = store
        self.producers = producers
        self.offsets = offsets

    async def __call__(self, txn_id: str, record: TxnRecord, commit: bool) -> bool:
        """Write the markers of ``record``'s transaction; whether all are durable."""
        now = int(time.time() * 1000)
        marker = build_control_batch(commit, record.producer_id, record.producer_epoch, now)
        header = read_header(marker)
        kind = CONTROL_COMMIT if commit else CONTROL_ABORT
        ends, ok = [], True
        offsets_partitions = []
        for topic, partition in sorted(record.partitions):
            if topic == OFFSETS_TOPIC:
                offsets_partitions.append(partition)
                continue
            known = self.store.topic(topic)
            if known is None or partition >= known.partitions:
                continue  # deleted meanwhile: nothing left to mark
            result = self.store.append(topic, partition, memoryview(bytearray(marker)),
                                       offset_count=1, max_timestamp=now,
                                       sys_flag=header.attributes)
            if result.status is not StoreStatus.OK:
                log.warning("transaction %r: marker for %s-%d not written: %s", txn_id, topic,
                            partition, result.status)
                ok = False
                continue
            self.producers.record(known.topic_id, partition, header, result.base_offset, now,
                                  result.phy_end, kind)
            ends.append(result.phy_end)
        if ends and await self.store.wait_durable(max(ends)) is not StoreStatus.OK:
            ok = False
        for partition in offsets_partitions:  # each ends every group's offsets there
            error = await self.offsets.end_txn_in(partition, record.producer_id,
                                                  record.producer_epoch, commit)
            if error is not ErrorCode.NONE:
                log.warning("transaction %r: offsets in %s-%d not %s: %s", txn_id,
                            OFFSETS_TOPIC, partition, "committed" if commit else "aborted",
                            error.name)
                ok = False
        return ok
