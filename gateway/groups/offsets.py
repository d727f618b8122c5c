"""Committed offsets: OffsetCommit's checks (Kafka's OffsetMetadataManager and
ClassicGroup.validateOffsetCommit), OffsetFetch, OffsetDelete and the expiry of offsets
after ``offsets.retention.minutes``. Every change is written to ``__consumer_offsets`` first;
the table here is what replaying that topic gives.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.config import BrokerConfig
from gateway.groups.consumer_group import ConsumerGroup
from gateway.groups.group import CONSUMER_PROTOCOL, ClassicGroup, GroupState, now_ms
from gateway.groups.membership import Membership
from gateway.groups.offsets_topic import OffsetsTopic
from gateway.groups.records import OffsetValue, offset_key, offset_value
from protocol.errors import ErrorCode

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

    # ---- OffsetCommit ------------------------------------------------------------------------

    async def commit(self, req: CommitRequest) -> list[ErrorCode]:
        """One error per commit, in order."""
        if req.group_id in self.consumer_groups:
            error = _validate_consumer_commit(self.consumer_groups[req.group_id], req)
            if error is not ErrorCode.NONE:
                return [error] * len(req.commits)
            return await self._write_commits(req)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation >= 0:
                error = ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 else \
                    ErrorCode.ILLEGAL_GENERATION
                return [error] * len(req.commits)
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)  # a simple group
        error = _validate_commit(group, req)
        if error is not ErrorCode.NONE:
            return [error] * len(req.commits)
        if group.is_(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.membership.keep_alive(group, req.member_id)
        return await self._write_commits(req)

    async def _write_commits(self, req: CommitRequest) -> list[ErrorCode]:
        now = now_ms()
        expire = now + req.retention_ms if req.retention_ms >= 0 else -1
        limit = self.config.offset_metadata_max_bytes
        errors, accepted = [], {}
        for c in req.commits:
            if c.metadata is not None and len(c.metadata) > limit:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            accepted[(c.topic, c.partition)] = OffsetValue(c.offset, c.leader_epoch,
                                                           c.metadata or "", now, expire)
        records = [(offset_key(req.group_id, t, p), offset_value(v))
                   for (t, p), v in accepted.items()]
        written = await self.topic.write(
            req.group_id, records, lambda: self.table.setdefault(req.group_id, {}).update(accepted))
        if written is not ErrorCode.NONE:
            errors = [e if e is not ErrorCode.NONE else written for e in errors]
        return errors

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
            gone += [(topic, p) for p in partitions if (topic, p) in committed]
        written = await self.remove(group_id, gone)
        return written, errors if written is ErrorCode.NONE else []

    async def remove(self, group_id: str, partitions: list[TopicPartition]) -> ErrorCode:
        """Write tombstones for these committed offsets, then forget them."""
        committed = self.table.get(group_id, {})

        def forget() -> None:
            for key in partitions:
                committed.pop(key, None)
            if not committed:
                self.table.pop(group_id, None)
        return await self.topic.write(group_id, [(offset_key(group_id, t, p), None)
                                                 for t, p in partitions], forget)

    # ---- expiry ------------------------------------------------------------------------------

    async def expire(self) -> None:
        """Kafka's offset expiration: offsets of an Empty group once the retention has passed
        since it became empty (or since the commit, for simple groups), a Stable consumer
        group's offsets of topics no member subscribes to any more; an Empty group left without
        offsets goes too."""
        now, retention = now_ms(), self.config.offsets_retention_minutes * 60_000
        for group_id, committed in list(self.table.items()):
            group = self.groups.get(group_id)
            if group is None:
                continue
            expired = [key for key, value in committed.items()
                       if _expired(group, key[0], value, now, retention)]
            if expired:
                log.info("group %s: %d committed offsets expired", group_id, len(expired))
                await self.remove(group_id, expired)

    def groups_without_offsets(self) -> list[str]:
        return [g for g, group in self.groups.items()
                if group.is_(GroupState.EMPTY) and not self.table.get(g)]


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


def _validate_consumer_commit(group: ConsumerGroup, req: CommitRequest) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit: a member commits at its current epoch,
    over OffsetCommit v9+; anyone may commit with epoch -1 while the group has no member."""
    if req.generation < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(req.member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if req.version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if req.generation != member.epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def _validate_commit(group: ClassicGroup, req: CommitRequest) -> ErrorCode:
    """Kafka's ClassicGroup.validateOffsetCommit."""
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
    elif not group.is_(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE
