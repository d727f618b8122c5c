"""KIP-848's ConsumerGroupHeartbeat state machine, as Kafka's GroupMetadataManager runs it for
consumer groups: one request joins (epoch 0), heartbeats, acknowledges revocations and leaves
(epoch -1; -2 for a static member that will come back).

On each heartbeat: the member is created or updated; a changed subscription (or changed
partition counts of subscribed topics) bumps the group epoch; a group epoch past the target
assignment's runs the server-side assignor; then the member is reconciled one step towards its
target (``consumer_group.reconcile``), which revokes before it assigns. A member that does not
revoke within its rebalance timeout, or sends no heartbeat within
``group.consumer.session.timeout.ms``, is fenced: removed, and the group epoch bumped. What a
request changed (``consumer_records.changes``) is written to ``__consumer_offsets`` before the
answer, so a restarted broker knows the same members, epochs and assignments.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.assignors import ASSIGNORS, Topics
from commitgate.gateway.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    is_subset,
    pairs,
    reconcile,
)
from commitgate.gateway.groups.consumer_records import GroupImage, Record, changes, image
from commitgate.gateway.groups.consumer_regex import InvalidRegex, compile_regex
from commitgate.gateway.groups.group import ClassicGroup, GroupState
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Owned = list[tuple[uuid.UUID, list[int]]]
CLIENT_MEMBER_ID_VERSION = 1  # from v1 the client makes its member id (KIP-1082)


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class HeartbeatRequest:
    version: int
    group_id: str
    member_id: str
    epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed: list[str] | None  # None: unchanged
    regex: str | None  # None: unchanged (always None in v0)
    server_assignor: str | None
    owned: Owned | None  # None: unchanged
    client_id: str
    client_host: str


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    assignment: Assignment | None = None  # None: not sent (unchanged)


def new_member_id() -> str:
    """A random id in the form of Kafka's Uuid.toString (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerMembership:
    def __init__(self, config: BrokerConfig, groups: dict[str, ConsumerGroup],
                 classic: dict[str, ClassicGroup],
                 topic_info: Callable[[str], tuple[uuid.UUID, int] | None],
                 topic_names: Callable[[], list[str]],
                 store: Callable[[str, list[Record]], Awaitable[ErrorCode]],
                 drop_classic: Callable[[ClassicGroup], None],
                 spawn: Callable[[Awaitable], None]) -> None:
        self.config = config
        self.groups = groups
        self.classic = classic
        self.topic_info = topic_info
        self.topic_names = topic_names
        self.store = store
        self.drop_classic = drop_classic
        self.spawn = spawn

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(req)
            if req.epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return await self._leave(req)
            return await self._heartbeat(req)
        except HeartbeatError as exc:
            return HeartbeatResult(exc.code, str(exc))

    # ---- checks ------------------------------------------------------------------------------

    def _validate(self, req: HeartbeatRequest) -> None:
        """Kafka 4's throwIfConsumerGroupHeartbeatRequestIsInvalid, same order and messages
        (blank means empty once trimmed, as Kafka's throwIfEmptyString), then a new regex must
        compile (Kafka checks it when it is new to the group: an invalid one never is in it)."""
        if req.version >= CLIENT_MEMBER_ID_VERSION or req.epoch > 0 or req.epoch == LEAVE_EPOCH:
            _require(not _blank(req.member_id), "MemberId can't be empty.")
        _require(not _blank(req.group_id), "GroupId can't be empty.")
        _require(not _blank(req.instance_id), "InstanceId can't be empty.")
        _require(not _blank(req.rack_id), "RackId can't be empty.")
        if req.epoch == 0:
            _require(req.rebalance_timeout_ms != -1,
                     "RebalanceTimeoutMs must be provided in first request.")
            _require(req.owned is not None and not req.owned,
                     "TopicPartitions must be empty when (re-)joining.")
            _require(req.subscribed is not None or req.regex is not None,
                     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                     "(re-)joining.")
        elif req.epoch == STATIC_LEAVE_EPOCH:
            _require(req.instance_id is not None, "InstanceId can't be null.")
        elif req.epoch < STATIC_LEAVE_EPOCH:
            _require(False, "MemberEpoch is invalid.")
        assignors = self.config.consumer_group_assignors
        if req.server_assignor is not None and req.server_assignor not in assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {req.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(assignors)}.")
        if req.regex and req.epoch >= 0:
            try:
                compile_regex(req.regex)
            except InvalidRegex as exc:
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        """The consumer group; on a join, a new one, replacing an empty classic group."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.classic.get(group_id)
        if classic is None and not create:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Consumer group {group_id} not found.")
        if classic is not None and not (create and classic.is_(GroupState.EMPTY)):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a consumer group")
        if classic is not None:
            self.drop_classic(classic)
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _member(self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str
                ) -> ConsumerMember:
        create = req.epoch == 0
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None and not create:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not "
                                     f"a member of group {group.group_id}.")
            member = member or ConsumerMember(member_id)
            _check_epoch(member, req)
            return member
        existing = group.members.get(group.static_members.get(req.instance_id, ""))
        if not create:
            _check_static(existing, member_id, req.instance_id)
            _check_epoch(existing, req)
            return existing
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        if existing.epoch != STATIC_LEAVE_EPOCH:
            raise HeartbeatError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.")
        _cancel_timers(existing)
        log.info("group %s: static member %s rejoined as %s (was %s)", group.group_id,
                 req.instance_id, member_id, existing.member_id)
        return group.replace_static(existing, member_id)

    # ---- heartbeat ---------------------------------------------------------------------------

    async def _heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self._group(req.group_id, req.epoch == 0)
        before = image(group)
        member_id = req.member_id or new_member_id()
        member = self._member(group, req, member_id)
        if member_id not in group.members:
            log.info("group %s: member %s joins (consumer protocol)", group.group_id, member_id)
        updated = _updated(member, req)
        group.put(updated)
        resolved = self._resolve_regexes(group)
        topics = self._topics(group.subscribed_topics())
        if resolved or topics != group.topics or (updated.subscribed, updated.regex) != \
                (member.subscribed, member.regex):
            group.epoch += 1
            group.topics = topics
            log.info("group %s: epoch %d", group.group_id, group.epoch)
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        final = self._reconcile(group, group.members[member_id], req.owned)
        self._schedule_session(group, final)
        await self._store(group, before)
        full = req.epoch == 0 or (req.rebalance_timeout_ms != -1 and req.owned is not None and
                                  (req.subscribed is not None or req.regex is not None))
        changed = final.assigned != member.assigned
        return HeartbeatResult(member_id=member_id, epoch=final.epoch,
                               assignment=final.assigned if full or changed else None)

    def _resolve_regexes(self, group: ConsumerGroup) -> bool:
        """Resolve the group's regexes when one is new or a refresh is due (consumer_regex);
        whether what they resolve to changed."""
        regexes = group.subscribed_regexes()
        if not regexes:
            return False
        names = self.topic_names()
        if not group.regexes.due(regexes, len(names)):
            return False
        changed = group.regexes.refresh(regexes, names)
        if changed:
            log.info("group %s: regexes resolved to %s", group.group_id,
                     {r: sorted(t) for r, t in group.regexes.topics.items()})
        return changed

    def _topics(self, names: set[str]) -> Topics:
        found = {name: self.topic_info(name) for name in names}
        return {name: info for name, info in found.items() if info is not None}

    def _assign(self, group: ConsumerGroup) -> None:
        name = group.preferred_assignor() or self.config.consumer_group_assignors[0]
        subscriptions = {m.member_id: tuple(sorted(group.member_topics(m)))
                         for m in group.members.values()}
        group.target = ASSIGNORS[name](subscriptions, group.topics, group.target)
        group.assignment_epoch = group.epoch
        log.info("group %s: target assignment of epoch %d by %s", group.group_id, group.epoch,
                 name)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Owned | None
                   ) -> ConsumerMember:
        moved = reconcile(group, member, owned)
        if moved is member:
            return member
        group.put(moved)
        _cancel(moved.rebalance_timer)
        moved.rebalance_timer = None
        self._schedule_revocation(group, moved)
        return moved

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member with partitions to give up has its rebalance timeout to do it."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            member.rebalance_timer = _later(member.rebalance_timeout_ms,
                                            self._revocation_expired, group, member.member_id,
                                            member.epoch)

    # ---- leaving and fencing -----------------------------------------------------------------

    async def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            self._group(req.group_id, create=False)  # raises the right GROUP_ID_NOT_FOUND
        before = image(group)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is "
                                     f"not a member of group {group.group_id}.")
        else:
            member = group.members.get(group.static_members.get(req.instance_id, ""))
            _check_static(member, req.member_id, req.instance_id)
            if req.epoch == STATIC_LEAVE_EPOCH:  # keeps its partitions until its session ends
                _cancel(member.rebalance_timer)
                group.put(replace(member, epoch=STATIC_LEAVE_EPOCH, pending_revocation={},
                                  rebalance_timer=None))
                log.info("group %s: static member %s left for a while", group.group_id,
                         req.instance_id)
                await self._store(group, before)
                return HeartbeatResult(member_id=member.member_id, epoch=STATIC_LEAVE_EPOCH)
        self._remove(group, member, "left the group")
        await self._store(group, before)
        return HeartbeatResult(member_id=req.member_id, epoch=req.epoch)

    async def _store(self, group: ConsumerGroup, before: GroupImage) -> None:
        error = await self.store(group.group_id, changes(group, before))
        if error is not ErrorCode.NONE:
            raise HeartbeatError(error, "the group metadata could not be stored")

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """Fence a member: it goes, its partitions are free, the group epoch moves on."""
        log.info("group %s: member %s removed: %s", group.group_id, member.member_id, why)
        _cancel_timers(member)
        group.remove(member.member_id)
        group.epoch += 1
        group.topics = self._topics(group.subscribed_topics())

    def _fence_later(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        before = image(group)
        self._remove(group, member, why)
        self.spawn(self.store(group.group_id, changes(group, before)))

    def resume(self, group: ConsumerGroup) -> None:
        """A group loaded at start: every member gets a new session (Kafka restarts the timers
        at load), and one that still has partitions to revoke a new rebalance timeout. The
        assignors give out every partition of the subscribed topics, so a target that does not
        cover exactly those means topics changed while the broker was down: new group epoch."""
        self._resolve_regexes(group)
        group.topics = self._topics(group.subscribed_topics())
        covered = {tp for target in group.target.values() for tp in pairs(target)}
        wanted = {(tid, p) for tid, count in group.topics.values() for p in range(count)}
        if group.members and covered != wanted:
            before = image(group)
            group.epoch += 1
            log.info("group %s: subscribed topics changed while down, epoch %d",
                     group.group_id, group.epoch)
            self.spawn(self.store(group.group_id, changes(group, before)))
        for member in group.members.values():
            self._schedule_session(group, member)
            self._schedule_revocation(group, member)

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        _cancel(member.session_timer)
        member.session_timer = _later(self.config.consumer_group_session_timeout_ms,
                                      self._fence_later, group, member.member_id,
                                      "session timed out")

    def _revocation_expired(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = group.members.get(member_id)
        if member is not None and member.epoch == epoch:
            member.rebalance_timer = None
            self._fence_later(group, member_id, f"did not revoke partitions within "
                                                f"{member.rebalance_timeout_ms} ms")

    def unload(self, group: ConsumerGroup) -> None:
        """Cancel the group's timers (shutdown or deletion)."""
        for member in group.members.values():
            _cancel_timers(member)


def _updated(member: ConsumerMember, req: HeartbeatRequest) -> ConsumerMember:
    """The member with what the request changed (null fields keep their value)."""
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None
        else member.server_assignor,
        subscribed=tuple(sorted(set(req.subscribed))) if req.subscribed is not None
        else member.subscribed,
        regex=req.regex if req.regex is not None else member.regex,
        client_id=req.client_id, client_host=req.client_host)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, message)


def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
    """Kafka's member epoch fencing: a member ahead of us, or behind us other than by a lost
    answer (the previous epoch, owning only what it was assigned), must rejoin."""
    if req.epoch > member.epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, _fenced_message(
            "greater", req.epoch, member.epoch))
    if req.epoch < member.epoch and (req.epoch != member.previous_epoch or
                                     not is_subset(req.owned, member.assigned)):
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, _fenced_message(
            "smaller", req.epoch, member.epoch))


def _fenced_message(which: str, got: int, known: int) -> str:
    return (f"The consumer group member has a {which} member epoch ({got}) than the one known "
            f"by the group coordinator ({known}). The member must abandon all its partitions "
            f"and rejoin.")


def _check_static(member: ConsumerMember | None, member_id: str, instance_id: str) -> None:
    if member is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was "
                             f"fenced by member {member.member_id}.")


def _later(delay_ms: int, callback: Callable, *args: object) -> asyncio.TimerHandle:
    return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)


def _cancel(handle: asyncio.TimerHandle | None) -> None:
    if handle is not None:
        handle.cancel()


def _cancel_timers(member: ConsumerMember) -> None:
    _cancel(member.session_timer)
    _cancel(member.rebalance_timer)
    member.session_timer = member.rebalance_timer = None
