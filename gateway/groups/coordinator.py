"""The group coordinator: this broker coordinates every group. It owns the groups, replays
``__consumer_offsets`` at start (groups, members and committed offsets survive restarts), runs
the offset expiry and answers the group admin APIs (DescribeGroups, ListGroups, DeleteGroups).
The classic protocol lives in ``membership``, committed offsets in ``offsets``.
"""
from __future__ import annotations

import asyncio
import logging

from engine import MessageStore
from gateway.config import BrokerConfig
from gateway.groups.group import ClassicGroup, GroupState
from gateway.groups.membership import Membership
from gateway.groups.offsets import OffsetManager
from gateway.groups.offsets_topic import OffsetsTopic
from gateway.groups.records import (GroupValue, RecordFormatError,
                                    group_key, group_value, read_group_value, read_key,
                                    read_offset_value)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

GROUP_TYPE = "classic"


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.topic = OffsetsTopic(store, config.offsets_topic_num_partitions)
        self.membership = Membership(config, self.groups, self.store_group)
        self.offsets = OffsetManager(config, self.groups, self.membership, self.topic)
        self._expiry_task: asyncio.Task | None = None

    # ---- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Replay the offsets topic, give loaded members a session, start the offset expiry."""
        self._load()
        for group in self.groups.values():
            self.membership.resume(group)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_loop(),
                                                                   name="offset-expiry")
        log.info("group coordinator: %d groups, %d with committed offsets loaded",
                 len(self.groups), len(self.offsets.table))

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        for group in self.groups.values():
            self.membership.unload(group)
        await self.membership.drain()

    def _load(self) -> None:
        table = self.offsets.table
        for key, value in self.topic.replay():
            try:
                group_id, topic, partition = read_key(key)
                if topic is None:
                    self._load_group(group_id, value)
                elif value is None:
                    table.get(group_id, {}).pop((topic, partition), None)
                else:
                    table.setdefault(group_id, {})[(topic, partition)] = read_offset_value(value)
            except (RecordFormatError, UnicodeDecodeError) as exc:
                log.error("skipping an unreadable record of the offsets topic: %s", exc)
        for group_id, committed in list(table.items()):
            if not committed:
                del table[group_id]
            elif group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id)

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

    def list(self, states: list[str], types: list[str]) -> list[ClassicGroup]:
        """Groups whose state and type (only "classic" here) pass the filters (any case)."""
        states_ = {s.strip().lower() for s in states}
        types_ = {t.strip().lower() for t in types}
        return [g for g in self.groups.values()
                if (not states_ or g.state.value.lower() in states_) and
                (not types_ or GROUP_TYPE in types_) and not g.is_(GroupState.DEAD)]

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        return await self._delete(group)

    async def _delete(self, group: ClassicGroup) -> ErrorCode:
        """Tombstones for the group's offsets and metadata, then the group is Dead and gone."""
        group_id = group.group_id
        committed = list(self.offsets.table.get(group_id, {}))
        error = await self.offsets.remove(group_id, committed)
        if error is ErrorCode.NONE:
            error = await self.topic.write(group_id, [(group_key(group_id), None)],
                                           lambda: self._forget(group))
        return error

    def _forget(self, group: ClassicGroup) -> None:
        if not group.is_(GroupState.EMPTY):  # a member joined while the tombstones were written
            return
        group.transition(GroupState.DEAD)
        self.membership.unload(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        log.info("group %s deleted", group.group_id)
