"""Transactional offsets waiting for their transaction to end (Kafka's
``pendingTransactionalOffsets`` and ``openTransactionsByGroup`` of the OffsetMetadataManager).

TxnOffsetCommit writes its offsets to ``__consumer_offsets`` in a transactional batch; they stay
here, invisible to OffsetFetch, until a COMMIT marker of the same producer in the same partition
of ``__consumer_offsets`` moves them into the committed table, or an ABORT marker drops them.
A transaction is therefore known by (offsets partition, producer id): its marker ends the
pending offsets of every group of that partition, which is what replaying the log gives.
"""
from __future__ import annotations

from commitgate.gateway.groups.records import OffsetValue

TopicPartition = tuple[str, int]
TxnKey = tuple[int, int]  # (partition of __consumer_offsets, producer id)
GroupOffsets = dict[str, dict[TopicPartition, OffsetValue]]  # group -> partition -> offset


class PendingOffsets:
    def __init__(self) -> None:
        self._by_txn: dict[TxnKey, GroupOffsets] = {}
        self._open: dict[str, set[TxnKey]] = {}  # group -> its open transactions

    def add(self, txn: TxnKey, group_id: str, offsets: dict[TopicPartition, OffsetValue]) -> None:
        """Offsets of ``txn`` written for the group (a later write of a partition replaces)."""
        self._by_txn.setdefault(txn, {}).setdefault(group_id, {}).update(offsets)
        self._open.setdefault(group_id, set()).add(txn)

    def has(self, group_id: str, partition: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of this partition for the group
        (OffsetFetch's ``require_stable`` then answers UNSTABLE_OFFSET_COMMIT)."""
        return any(partition in self._by_txn[txn][group_id]
                   for txn in self._open.get(group_id, ()))

    def has_txn(self, txn: TxnKey) -> bool:
        return txn in self._by_txn

    def has_group(self, group_id: str) -> bool:
        """Whether the group is part of an open transaction (it is then not deleted for having
        no offsets, as in Kafka)."""
        return group_id in self._open

    def groups(self) -> list[str]:
        return list(self._open)

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """Every partition with a pending offset for the group."""
        return {tp for txn in self._open.get(group_id, ()) for tp in self._by_txn[txn][group_id]}

    def drop(self, group_id: str, partitions: list[TopicPartition]) -> None:
        """A tombstone of these partitions' offsets removes their pending offsets too; the
        transactions stay open until their markers."""
        for txn in self._open.get(group_id, ()):
            offsets = self._by_txn[txn][group_id]
            for tp in partitions:
                offsets.pop(tp, None)

    def end(self, txn: TxnKey) -> GroupOffsets:
        """Forget the transaction; its pending offsets, by group, for a commit to apply."""
        ended = self._by_txn.pop(txn, {})
        for group_id in ended:
            open_ = self._open[group_id]
            open_.discard(txn)
            if not open_:
                del self._open[group_id]
        return ended
