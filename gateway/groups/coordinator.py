"""The group coordinator: this broker coordinates every group. It owns the groups, replays
``__consumer_offsets`` at start (groups, members and committed offsets survive restarts), runs
the offset expiry and answers the group admin APIs (DescribeGroups, ListGroups, DeleteGroups).
The classic protocol lives in ``membership``, KIP-848's consumer protocol in
``consumer_membership``, committed offsets in ``offsets``. Both kinds of group share one
namespace of group ids: a group id is either a classic group or a consumer group.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import NamedTuple

from commitgate.engine import MessageStore
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.consumer_group import ConsumerGroup
from commitgate.gateway.groups.consumer_membership import ConsumerMembership
from commitgate.gateway.groups.consumer_records import KINDS, Record, deletion, replay
from commitgate.gateway.groups.group import CONSUMER_PROTOCOL, ClassicGroup, GroupState
from commitgate.gateway.groups.membership import Membership
from commitgate.gateway.groups.offsets import OffsetManager
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC, OffsetsTopic, Replayed
from commitgate.gateway.groups.records import (
    GroupValue,
    RecordFormatError,
    group_key,
    group_value,
    read_group_value,
    read_key,
)
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import CONTROL_COMMIT

log = logging.getLogger(__name__)

CLASSIC_TYPE = "classic"
CONSUMER_TYPE = "consumer"


class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    type: str  # "classic" or "consumer" (KIP-848)


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.topic = OffsetsTopic(store, config.offsets_topic_num_partitions)
        self.membership = Membership(config, self.groups, self.store_group, self._claim_classic)
        self.consumer = ConsumerMembership(config, self.consumer_groups, self.groups,
                                           self._topic_info, self._topic_names,
                                           self.store_consumer_group,
                                           self._drop_classic, self.membership.spawn)
        self.offsets = OffsetManager(config, self.groups, self.consumer_groups, self.membership,
                                     self.topic)
        self._expiry_task: asyncio.Task | None = None

    # ---- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Replay the offsets topic, give loaded members a session, start the offset expiry."""
        began = time.monotonic()
        self._load()
        for group in self.groups.values():
            self.membership.resume(group)
        for consumer_group in self.consumer_groups.values():
            self.consumer.resume(consumer_group)
        self._expiry_task = self.store.supervisor.spawn("offset-expiry", self._expire_loop)
        log.info("group coordinator: %d groups, %d with committed offsets loaded from %d "
                 "records of %s in %.3f s", len(self.groups), len(self.offsets.table),
                 self.topic.replayed, OFFSETS_TOPIC, time.monotonic() - began)

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        for group in self.groups.values():
            self.membership.unload(group)
        for consumer_group in self.consumer_groups.values():
            self.consumer.unload(consumer_group)
        await self.membership.drain()

    def _load(self) -> None:
        for item in self.topic.replay():
            if item.marker is not None:
                self.offsets.replay_marker((item.partition, item.producer_id),
                                           item.marker == CONTROL_COMMIT)
                continue
            try:
                self._load_record(item)
            except (RecordFormatError, UnicodeDecodeError) as exc:
                log.error("skipping an unreadable record of the offsets topic: %s", exc)
        for group_id in self.offsets.loaded():
            if group_id not in self.groups and group_id not in self.consumer_groups:
                self.groups[group_id] = ClassicGroup(group_id)

    def _load_record(self, item: Replayed) -> None:
        parsed = read_key(item.key)
        kind, group_id, topic, partition = parsed
        if kind == "group":
            self._load_group(group_id, item.value)
        elif kind in KINDS:
            replay(self.consumer_groups, parsed, item.value)
        else:
            txn = (item.partition, item.producer_id) if item.producer_id >= 0 else None
            self.offsets.replay_offset(group_id, (topic, partition), item.value, item.offset, txn)

    def _load_group(self, group_id: str, value: bytes | None) -> None:
        if value is None:
            self.groups.pop(group_id, None)
            return
        stored = read_group_value(value)
        group = ClassicGroup(group_id, GroupState.STABLE if stored.members else GroupState.EMPTY)
        group.state_timestamp = stored.state_ms
        group.generation = stored.generation
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        for member in stored.members:
            group.add(member)
        group.leader = stored.leader if stored.leader in group.members else group.leader
        self.groups[group_id] = group

    async def store_group(self, group: ClassicGroup) -> ErrorCode:
        """Write the group's metadata (members and assignment) as it is now."""
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name,
                           group.leader, group.state_timestamp, list(group.members.values()))
        return await self.topic.write(group.group_id,
                                      [(group_key(group.group_id), group_value(value))],
                                      lambda: None)

    async def store_consumer_group(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Write what changed in a KIP-848 group (``consumer_records.changes``)."""
        return await self.topic.write(group_id, records, lambda: None)

    # ---- one namespace for both kinds of group ----------------------------------------------

    def _topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        record = self.store.topic(name)
        return None if record is None else (uuid.UUID(record.topic_id), record.partitions)

    def _topic_names(self) -> list[str]:
        return [record.name for record in self.store.topics()]

    def _claim_classic(self, group_id: str) -> ErrorCode:
        """A JoinGroup for an id a consumer group holds: an empty one gives way (Kafka deletes
        it); a non-empty one is refused (mixed groups are not supported)."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self._forget_consumer_group(group)
        self.membership.spawn(self.topic.write(group_id, deletion(group_id), lambda: None))
        return ErrorCode.NONE

    def _drop_classic(self, group: ClassicGroup) -> None:
        """An empty classic group gives way to a consumer group; its offsets stay."""
        self.membership.unload(group)
        del self.groups[group.group_id]
        self.membership.spawn(self.topic.write(group.group_id,
                                               [(group_key(group.group_id), None)], lambda: None))

    def _forget_consumer_group(self, group: ConsumerGroup) -> None:
        if group.members:  # a member joined while the tombstone was written
            return
        group.dead = True
        self.consumer.unload(group)
        if self.consumer_groups.get(group.group_id) is group:
            del self.consumer_groups[group.group_id]

    async def _expire_loop(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.offsets.expire()
                for group_id in self.offsets.groups_without_offsets():
                    await self._delete(self.groups[group_id])
            except Exception:  # the loop must outlive one bad round
                log.exception("offset expiry failed")

    # ---- admin -------------------------------------------------------------------------------

    def describe(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return None if group is None or group.is_(GroupState.DEAD) else group

    def list(self, states: list[str], types: list[str]) -> list[ListedGroup]:
        """Groups whose state and type pass the filters (any case)."""
        states_ = {s.strip().lower() for s in states}
        types_ = {t.strip().lower() for t in types}
        listed = [ListedGroup(g.group_id, g.protocol_type or "", g.state.value, CLASSIC_TYPE)
                  for g in self.groups.values() if not g.is_(GroupState.DEAD)]
        listed += [ListedGroup(g.group_id, CONSUMER_PROTOCOL, g.state.value, CONSUMER_TYPE)
                   for g in self.consumer_groups.values()]
        return [g for g in listed if (not states_ or g.state.lower() in states_) and
                (not types_ or g.type in types_)]

    async def delete_group(self, group_id: str) -> ErrorCode:
        if group_id in self.consumer_groups:
            return await self._delete_consumer_group(self.consumer_groups[group_id])
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        return await self._delete(group)

    async def _delete(self, group: ClassicGroup) -> ErrorCode:
        """Tombstones for the group's offsets and metadata, then the group is Dead and gone."""
        group_id = group.group_id
        error = await self.offsets.remove(group_id, self.offsets.partitions(group_id))
        if error is ErrorCode.NONE:
            error = await self.topic.write(group_id, [(group_key(group_id), None)],
                                           lambda: self._forget(group))
        return error

    async def _delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        group_id = group.group_id
        error = await self.offsets.remove(group_id, self.offsets.partitions(group_id))
        if error is ErrorCode.NONE:
            error = await self.topic.write(group_id, deletion(group_id),
                                           lambda: self._forget_consumer_group(group))
        return error

    def _forget(self, group: ClassicGroup) -> None:
        if not group.is_(GroupState.EMPTY):  # a member joined while the tombstones were written
            return
        group.transition(GroupState.DEAD)
        self.membership.unload(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        log.info("group %s deleted", group.group_id)
