"""Committed offsets: OffsetCommit's and TxnOffsetCommit's checks (Kafka's OffsetMetadataManager
and ClassicGroup.validateOffsetCommit), OffsetFetch, OffsetDelete, the end of transactions
holding offsets, and the expiry of offsets after ``offsets.retention.minutes``. Every change is
written to ``__consumer_offsets`` first; the table here (and the pending transactional offsets)
is what replaying that topic gives.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.consumer_group import ConsumerGroup
from commitgate.gateway.groups.group import CONSUMER_PROTOCOL, ClassicGroup, GroupState, now_ms
from commitgate.gateway.groups.membership import Membership
from commitgate.gateway.groups.offsets_topic import OffsetsTopic
from commitgate.gateway.groups.records import (
    OffsetValue,
    offset_key,
    offset_value,
    read_offset_value,
)
from commitgate.gateway.groups.txn_offsets import PendingOffsets, TxnKey
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Commit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class CommitRequest:
    group_id: str
    generation: int  # -1: a simple commit, not from a group member
    member_id: str
    instance_id: str | None
    retention_ms: int  # OffsetCommit v2-4; -1: the broker's retention
    commits: list[Commit]
    version: int


class OffsetManager:
    def __init__(self, config: BrokerConfig, groups: dict[str, ClassicGroup],
                 consumer_groups: dict[str, ConsumerGroup], membership: Membership,
                 topic: OffsetsTopic) -> None:
        self.config = config
        self.groups = groups
        self.consumer_groups = consumer_groups
        self.membership = membership
        self.topic = topic
        self.table: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.txn_offsets = PendingOffsets()

    # ---- OffsetCommit ------------------------------------------------------------------------

    async def commit(self, req: CommitRequest) -> list[ErrorCode]:
        """One error per commit, in order."""
        error = self._validate(req, transactional=False)
        if error is not ErrorCode.NONE:
            return [error] * len(req.commits)
        errors, accepted = self._accept(req)

        def apply(first: int) -> None:
            _place(accepted, first)
            self.table.setdefault(req.group_id, {}).update(accepted)
        written = await self.topic.write_records(req.group_id, _records(req.group_id, accepted),
                                                 apply)
        return _with_write_error(errors, written)

    def _validate(self, req: CommitRequest, transactional: bool) -> ErrorCode:
        """Kafka's validateOffsetCommit / validateTransactionalOffsetCommit."""
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            return _validate_consumer_commit(consumer_group, req, transactional)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation >= 0:
                return ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 and not transactional \
                    else ErrorCode.ILLEGAL_GENERATION
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)  # a simple group
        error = _validate_commit(group, req, transactional)
        if error is ErrorCode.NONE and not transactional and \
                group.is_(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.membership.keep_alive(group, req.member_id)
        return error

    def _accept(self, req: CommitRequest
                ) -> tuple[list[ErrorCode], dict[TopicPartition, OffsetValue]]:
        """One error per commit (OFFSET_METADATA_TOO_LARGE or NONE) and the offsets to write."""
        now, limit = now_ms(), self.config.offset_metadata_max_bytes
        expire_ms = now + req.retention_ms if req.retention_ms >= 0 else -1
        errors, accepted = [], {}
        for c in req.commits:
            if c.metadata is not None and len(c.metadata) > limit:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            accepted[(c.topic, c.partition)] = OffsetValue(c.offset, c.leader_epoch,
                                                           c.metadata or "", now, expire_ms)
        return errors, accepted

    # ---- transactions ------------------------------------------------------------------------

    async def txn_commit(self, req: CommitRequest, producer_id: int, producer_epoch: int
                         ) -> list[ErrorCode]:
        """TxnOffsetCommit: one error per commit, in order. The offsets are written as one
        transactional batch and stay pending until ``end_txn``. The caller checked the
        producer's transaction; nothing here awaits before the append, so that check holds."""
        error = self._validate(req, transactional=True)
        if error is not ErrorCode.NONE:
            return [error] * len(req.commits)
        errors, accepted = self._accept(req)
        txn = (self.topic.partition_for(req.group_id), producer_id)

        def apply(first: int) -> None:
            _place(accepted, first)
            self.txn_offsets.add(txn, req.group_id, accepted)
        written = await self.topic.write_records(req.group_id, _records(req.group_id, accepted),
                                                 apply, producer_id, producer_epoch)
        return _with_write_error(errors, written)

    async def end_txn(self, group_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        """The end of the producer's transaction for the group (``end_txn_in``, in the
        group's partition of ``__consumer_offsets``)."""
        return await self.end_txn_in(self.topic.partition_for(group_id), producer_id,
                                     producer_epoch, commit)

    async def end_txn_in(self, partition: int, producer_id: int, producer_epoch: int,
                         commit: bool) -> ErrorCode:
        """The end of the producer's transaction in this partition of ``__consumer_offsets``
        (what a coordinator that knows only the transaction's partitions calls, as after a
        restart): a COMMIT or ABORT marker, then the pending offsets of every group there
        become committed (unless a later plain commit of a partition came after them) or are
        dropped. Nothing pending (ended before, or nothing was written): nothing to write."""
        txn = (partition, producer_id)
        if not self.txn_offsets.has_txn(txn):
            return ErrorCode.NONE
        return await self.topic.write_marker(partition, commit, producer_id, producer_epoch,
                                             lambda: self._end(txn, commit))

    def pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the partition for the group
        (OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT)."""
        return self.txn_offsets.has(group_id, (topic, partition))

    def _end(self, txn: TxnKey, commit: bool) -> None:
        ended = self.txn_offsets.end(txn)
        if not commit:
            return
        for group_id, offsets in ended.items():
            if not offsets:
                continue
            committed = self.table.setdefault(group_id, {})
            for key, value in offsets.items():
                current = committed.get(key)
                if current is None or value.record_offset > current.record_offset:
                    committed[key] = value

    # ---- replay ------------------------------------------------------------------------------

    def replay_offset(self, group_id: str, key: TopicPartition, value: bytes | None,
                      record_offset: int, txn: TxnKey | None) -> None:
        """One offset record of ``__consumer_offsets`` at start (``txn``: the transaction of
        a transactional batch's record)."""
        if value is None:
            self._forget(group_id, [key])
            return
        offset = read_offset_value(value)
        offset.record_offset = record_offset
        if txn is None:
            self.table.setdefault(group_id, {})[key] = offset
        else:
            self.txn_offsets.add(txn, group_id, {key: offset})

    def replay_marker(self, txn: TxnKey, commit: bool) -> None:
        self._end(txn, commit)

    def loaded(self) -> set[str]:
        """After the replay: the groups with committed or pending offsets."""
        for group_id in [g for g, committed in self.table.items() if not committed]:
            del self.table[group_id]
        return set(self.table) | set(self.txn_offsets.groups())

    # ---- OffsetFetch -------------------------------------------------------------------------

    def fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None
              ) -> list[tuple[str, list[tuple[int, OffsetValue | None]]]]:
        """Committed offsets of the partitions asked for (None: every committed one)."""
        committed = self.table.get(group_id, {})
        if wanted is None:
            by_topic: dict[str, list[tuple[int, OffsetValue | None]]] = {}
            for (topic, partition), value in sorted(committed.items()):
                by_topic.setdefault(topic, []).append((partition, value))
            return list(by_topic.items())
        return [(topic, [(p, committed.get((topic, p))) for p in partitions])
                for topic, partitions in wanted]

    # ---- OffsetDelete ------------------------------------------------------------------------

    async def delete(self, group_id: str, wanted: list[tuple[str, list[int]]]
                     ) -> tuple[ErrorCode, list[list[ErrorCode]]]:
        group = self.groups.get(group_id)
        error = ErrorCode.GROUP_ID_NOT_FOUND if group is None or group.is_(GroupState.DEAD) \
            else ErrorCode.NONE
        if error is ErrorCode.NONE and not group.is_(GroupState.EMPTY) and \
                group.protocol_type != CONSUMER_PROTOCOL:
            error = ErrorCode.NON_EMPTY_GROUP
        if error is not ErrorCode.NONE:
            return error, []
        committed = self.table.get(group_id, {})
        gone, errors = [], []
        for topic, partitions in wanted:
            if group.subscribed(topic):
                errors.append([ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC] * len(partitions))
                continue
            errors.append([ErrorCode.NONE] * len(partitions))
            gone += [(topic, p) for p in partitions
                     if (topic, p) in committed or self.txn_offsets.has(group_id, (topic, p))]
        written = await self.remove(group_id, gone)
        return written, errors if written is ErrorCode.NONE else []

    def partitions(self, group_id: str) -> list[TopicPartition]:
        """The partitions with a committed or a pending offset for the group (what deleting
        the group writes tombstones for)."""
        return list(self.table.get(group_id, {}).keys() | self.txn_offsets.partitions(group_id))

    async def remove(self, group_id: str, partitions: list[TopicPartition]) -> ErrorCode:
        """Write tombstones for these offsets, then forget them, pending ones too (Kafka's
        replay of a tombstone)."""
        return await self.topic.write(group_id, [(offset_key(group_id, t, p), None)
                                                 for t, p in partitions],
                                      lambda: self._forget(group_id, partitions))

    def _forget(self, group_id: str, partitions: list[TopicPartition]) -> None:
        committed = self.table.get(group_id, {})
        for key in partitions:
            committed.pop(key, None)
        if not committed:
            self.table.pop(group_id, None)
        self.txn_offsets.drop(group_id, partitions)

    # ---- expiry ------------------------------------------------------------------------------

    async def expire(self) -> None:
        """Kafka's offset expiration: offsets of an Empty group once the retention has passed
        since it became empty (or since the commit, for simple groups), a Stable consumer
        group's offsets of topics no member subscribes to any more, but not while a transaction
        holds an offset of the partition; an Empty group left without offsets and outside any
        transaction goes too."""
        now, retention = now_ms(), self.config.offsets_retention_minutes * 60_000
        for group_id, committed in list(self.table.items()):
            group = self.groups.get(group_id)
            if group is None:
                continue
            expired = [key for key, value in committed.items()
                       if _expired(group, key[0], value, now, retention) and
                       not self.txn_offsets.has(group_id, key)]
            if expired:
                log.info("group %s: %d committed offsets expired", group_id, len(expired))
                await self.remove(group_id, expired)

    def groups_without_offsets(self) -> list[str]:
        return [g for g, group in self.groups.items()
                if group.is_(GroupState.EMPTY) and not self.table.get(g) and
                not self.txn_offsets.has_group(g)]


def _records(group_id: str, accepted: dict[TopicPartition, OffsetValue]
             ) -> list[tuple[bytes, bytes | None]]:
    return [(offset_key(group_id, t, p), offset_value(v)) for (t, p), v in accepted.items()]


def _place(accepted: dict[TopicPartition, OffsetValue], first: int) -> None:
    """Record where each offset's record went: they are written in order from ``first``."""
    for i, value in enumerate(accepted.values()):
        value.record_offset = first + i


def _with_write_error(errors: list[ErrorCode], written: ErrorCode) -> list[ErrorCode]:
    if written is ErrorCode.NONE:
        return errors
    return [e if e is not ErrorCode.NONE else written for e in errors]


def _expired(group: ClassicGroup, topic: str, value: OffsetValue, now: int,
             retention_ms: int) -> bool:
    if value.expire_ms >= 0:
        return now >= value.expire_ms
    if group.protocol_type is None:  # a simple group: since its commit
        base = value.commit_ms
    elif group.is_(GroupState.EMPTY):
        base = group.state_timestamp
    elif group.is_(GroupState.STABLE) and not group.subscribed(topic) and \
            group.protocol_type == CONSUMER_PROTOCOL:
        base = value.commit_ms
    else:
        return False
    return now - base >= retention_ms


def _validate_consumer_commit(group: ConsumerGroup, req: CommitRequest,
                              transactional: bool) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit: a member commits at its current epoch,
    over OffsetCommit v9+ (any TxnOffsetCommit version, where a stale epoch is
    ILLEGAL_GENERATION); anyone may commit with epoch -1 while the group has no member."""
    if req.generation < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(req.member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and req.version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if req.generation != member.epoch:
        return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def _validate_commit(group: ClassicGroup, req: CommitRequest, transactional: bool) -> ErrorCode:
    """Kafka's ClassicGroup.validateOffsetCommit. A transactional commit without member id and
    generation (TxnOffsetCommit v0-2) is accepted whatever the group's state, and the state is
    not checked for one from a member."""
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if req.generation < 0 and group.is_(GroupState.EMPTY):
        return ErrorCode.NONE  # a simple commit while no member owns the partitions
    if req.generation >= 0 or req.member_id or req.instance_id is not None:
        error = group.validate_member(req.member_id, req.instance_id)
        if error is not ErrorCode.NONE:
            return error
        if req.generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
    elif not transactional and not group.is_(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE
