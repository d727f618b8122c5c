"""The classic group protocol's state machine: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
the timers that drive rebalances, as Kafka's GroupMetadataManager does for classic groups.

Empty -> PreparingRebalance (members (re)join; the join phase ends when every known member has
rejoined or the rebalance timeout passes) -> CompletingRebalance (the leader got the members and
sends the assignment in its SyncGroup) -> Stable; any join of a new member, a changed
subscription, a leave or a session expiry sends a Stable group back to PreparingRebalance.
Requests that must wait (JoinGroup, a follower's SyncGroup) await a future the state machine
completes. Timers (session expiry per member, the join phase, the pending SyncGroups, pending
KIP-394 member ids) are ``loop.call_later`` handles, cancelled when their reason goes away and
all cancelled at shutdown.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.group import ClassicGroup, GroupState, JoinResult, Member, SyncResult
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka: a new member's JoinGroup may be abandoned


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str
    client_host: str
    require_known_member_id: bool  # JoinGroup v4+: KIP-394 member id round trip
    skip_assignment_supported: bool  # JoinGroup v9+ (KIP-814)


class Membership:
    def __init__(self, config: BrokerConfig, groups: dict[str, ClassicGroup],
                 store_group: Callable[[ClassicGroup], Awaitable[ErrorCode]],
                 claim: Callable[[str], ErrorCode]) -> None:
        self.config = config
        self.groups = groups
        self.store_group = store_group
        self.claim = claim  # may a classic group use this id (a consumer group may hold it)
        self.tasks: set[asyncio.Task] = set()

    # ---- JoinGroup -------------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinResult:
        if not req.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= \
                cfg.group_max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        if (error := self.claim(req.group_id)) is not ErrorCode.NONE:
            return JoinResult(error, req.member_id)
        group = self.groups.get(req.group_id)
        if group is None and req.member_id:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
        if group is not None and group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not (group or ClassicGroup(req.group_id)).supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if group is None:
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)
        waiter = asyncio.get_running_loop().create_future()
        if req.member_id:
            self._join_existing(group, req, waiter)
        else:
            self._join_new(group, req, waiter)
        return await waiter

    def _join_new(self, group: ClassicGroup, req: JoinRequest, waiter: asyncio.Future) -> None:
        member_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            if old_id is None:
                self._add_and_rebalance(group, req, member_id, waiter)
            else:
                self._replace_static(group, req, old_id, member_id, waiter)
        elif req.require_known_member_id:
            group.pending_members[member_id] = self._later(
                req.session_timeout_ms, self._expire_pending, group, member_id)
            waiter.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_and_rebalance(group, req, member_id, waiter)

    def _join_existing(self, group: ClassicGroup, req: JoinRequest,
                       waiter: asyncio.Future) -> None:
        if req.member_id in group.pending_members:
            if req.instance_id is not None:  # pending ids are only handed to dynamic members
                waiter.set_result(JoinResult(ErrorCode.UNKNOWN_SERVER_ERROR, req.member_id))
                return
            _cancel(group.pending_members.pop(req.member_id))
            self._add_and_rebalance(group, req, req.member_id, waiter)
            return
        error = group.validate_member(req.member_id, req.instance_id)
        if error is not ErrorCode.NONE or group.is_(GroupState.EMPTY):
            waiter.set_result(JoinResult(error or ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            return
        member = group.members[req.member_id]
        unchanged = member.matches(req.protocols)
        if group.is_(GroupState.COMPLETING_REBALANCE) and unchanged or \
                group.is_(GroupState.STABLE) and unchanged and not group.is_leader(member.member_id):
            waiter.set_result(self._current_result(group, member, with_members=group.is_(
                GroupState.COMPLETING_REBALANCE) and group.is_leader(member.member_id)))
            return
        self._update_member(member, req, waiter)
        self._rebalance_or_complete(group, f"member {member.member_id} rejoined")

    def _add_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                           waiter: asyncio.Future) -> None:
        member = Member(member_id, req.instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        req.protocols, is_new=True, join_waiter=waiter)
        group.add(member)
        self._schedule_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if group.is_(GroupState.PREPARING_REBALANCE):
            group.new_member_added = True
        self._rebalance_or_complete(group, f"new member {member_id} joined")

    def _replace_static(self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str,
                        waiter: asyncio.Future) -> None:
        """A known group.instance.id joined without a member id: the new id takes the old
        one's place (the old one is fenced) and a Stable group keeps its assignment."""
        old_leader = group.leader
        member = group.replace_static(req.instance_id, old_id, new_id)
        _complete(member.join_waiter, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        _complete(member.sync_waiter, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        self._update_member(member, req, waiter)
        self._schedule_expiry(group, member, member.session_timeout_ms)
        log.info("group %s: static member %s rejoined as %s", group.group_id, req.instance_id,
                 new_id)
        if group.is_(GroupState.STABLE) and group.protocol_name == group.select_protocol():
            self.spawn(self._confirm_static(group, member, old_leader, req))
        elif not group.is_(GroupState.PREPARING_REBALANCE):
            self._prepare_rebalance(group, f"static member {req.instance_id} rejoined")

    async def _confirm_static(self, group: ClassicGroup, member: Member, old_leader: str | None,
                              req: JoinRequest) -> None:
        error = await self.store_group(group)
        if error is not ErrorCode.NONE:
            _complete(member.join_waiter, JoinResult(error, member.member_id))
            return
        leader_skips = req.skip_assignment_supported and group.is_leader(member.member_id)
        result = self._current_result(group, member, with_members=leader_skips)
        result.skip_assignment = leader_skips
        if not req.skip_assignment_supported:
            # an older leader must not think it leads: a Stable group would not relay its
            # new assignment (Kafka answers with the previous leader's id)
            result.leader = old_leader or ""
        _complete(member.join_waiter, result)

    def _update_member(self, member: Member, req: JoinRequest, waiter: asyncio.Future) -> None:
        _complete(member.join_waiter, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                                 member.member_id))
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = waiter

    @staticmethod
    def _current_result(group: ClassicGroup, member: Member, with_members: bool) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader or "",
                          list(group.members.values()) if with_members else [])

    # ---- rebalancing -------------------------------------------------------------------------

    def _rebalance_or_complete(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._fail_pending_syncs(group, ErrorCode.REBALANCE_IN_PROGRESS)
        _cancel(group.sync_timer)
        group.sync_timer = None
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.config.group_initial_rebalance_delay_ms
        initial = group.is_(GroupState.EMPTY) and delay > 0
        group.transition(GroupState.PREPARING_REBALANCE)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id,
                 group.generation, reason)
        _cancel(group.join_timer)
        group.initial_delay = initial
        if initial:
            group.new_member_added = False
            first = min(delay, timeout)
            group.join_timer = self._later(first, self._initial_join_deadline, group,
                                           max(timeout - first, 0))
        else:
            group.join_timer = self._later(timeout, self._complete_join, group)
            self._try_complete_join(group)

    def _initial_join_deadline(self, group: ClassicGroup, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: wait while new members keep arriving, up to the
        rebalance timeout, so the first generation of a starting group takes them all."""
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = self._later(delay, self._initial_join_deadline, group,
                                           remaining_ms - delay)
        else:
            group.join_timer = None
            group.initial_delay = False
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_delay and \
                group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        _cancel(group.join_timer)
        group.join_timer = None
        group.initial_delay = False
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        for member in [m for m in group.members.values()
                       if not m.awaiting_join and m.instance_id is None]:
            self._remove(group, member, "did not rejoin in time")
        if group.members and not group.elect_joined_leader():
            # only static members that have not rejoined: wait for them or their sessions
            timeout = max(m.rebalance_timeout_ms for m in group.members.values())
            group.join_timer = self._later(timeout, self._complete_join, group)
            return
        group.next_generation()
        log.info("group %s: generation %d (%s) with %d members", group.group_id,
                 group.generation, group.protocol_name, len(group.members))
        if group.is_(GroupState.EMPTY):
            self.spawn(self.store_group(group))
            return
        for member in group.members.values():
            _complete(member.join_waiter, self._current_result(
                group, member, with_members=group.is_leader(member.member_id)))
            member.is_new = False
            self._schedule_expiry(group, member, member.session_timeout_ms)
        timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_timer = self._later(timeout, self._expire_pending_syncs, group,
                                       group.generation)

    def _expire_pending_syncs(self, group: ClassicGroup, generation: int) -> None:
        """Members that got the new generation but sent no SyncGroup within the rebalance
        timeout are removed (Kafka's pending sync expiry)."""
        group.sync_timer = None
        if generation != group.generation or not group.pending_sync or \
                not group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._remove(group, member, "sent no SyncGroup in time")
        self._rebalance_or_complete(group, "members sent no SyncGroup in time")

    def _fail_pending_syncs(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            _complete(member.sync_waiter, SyncResult(error))

    # ---- SyncGroup ---------------------------------------------------------------------------

    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        error = self._validate(group, member_id, instance_id, generation)
        if error is ErrorCode.NONE and (
                protocol_type is not None and protocol_type != group.protocol_type or
                protocol_name is not None and protocol_name != group.protocol_name):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is ErrorCode.NONE and group.is_(GroupState.EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is ErrorCode.NONE and group.is_(GroupState.PREPARING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE:
            return SyncResult(error)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        self._schedule_expiry(group, member, member.session_timeout_ms)
        if group.is_(GroupState.STABLE):
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        if group.is_leader(member_id):
            self.spawn(self._apply_assignment(group, assignments))
        return await waiter

    async def _apply_assignment(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        generation = group.generation
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error = await self.store_group(group)
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            return  # a rebalance started meanwhile and answered the waiting members
        if error is not ErrorCode.NONE:
            self._fail_pending_syncs(group, error)
            self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        group.transition(GroupState.STABLE)
        log.info("group %s: stable at generation %d", group.group_id, generation)
        for member in group.members.values():
            _complete(member.sync_waiter, SyncResult(ErrorCode.NONE, group.protocol_type,
                                                     group.protocol_name, member.assignment))

    # ---- Heartbeat and LeaveGroup ------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        error = self._validate(group, member_id, instance_id, generation)
        if error is not ErrorCode.NONE:
            return error
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.keep_alive(group, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def keep_alive(self, group: ClassicGroup, member_id: str) -> None:
        """A heartbeat (or an offset commit) restarts the member's session timer."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_expiry(group, member, member.session_timeout_ms)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per (member id, instance id) leaving)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        return ErrorCode.NONE, [self._leave_one(group, member_id, instance_id)
                                for member_id, instance_id in members]

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None
                   ) -> ErrorCode:
        if not member_id:  # an administrator removing a static member by instance id
            member_id = group.static_members.get(instance_id or "", "")
            if not member_id:
                return ErrorCode.UNKNOWN_MEMBER_ID
        elif member_id in group.pending_members:
            _cancel(group.pending_members.pop(member_id))
            self._try_complete_join(group)
            return ErrorCode.NONE
        else:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error
        self._remove(group, group.members[member_id], "left the group")
        self._rebalance_or_complete(group, f"member {member_id} left")
        return ErrorCode.NONE

    # ---- expiry and removal ------------------------------------------------------------------

    def _schedule_expiry(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        _cancel(member.expiry)
        member.expiry = self._later(timeout_ms, self._expire, group, member.member_id)

    def _expire(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        member.expiry = None
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            self._schedule_expiry(group, member, member.session_timeout_ms)
            return  # waiting for the rebalance counts as alive
        self._remove(group, member, "session timed out")
        self._rebalance_or_complete(group, f"member {member_id} session timed out")

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _remove(self, group: ClassicGroup, member: Member, why: str) -> None:
        log.info("group %s: removing member %s: %s", group.group_id, member.member_id, why)
        _cancel(member.expiry)
        _complete(member.join_waiter, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        _complete(member.sync_waiter, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _validate(self, group: ClassicGroup | None, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is ErrorCode.NONE and generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return error

    # ---- life cycle --------------------------------------------------------------------------

    def resume(self, group: ClassicGroup) -> None:
        """A group loaded at start: its members get a fresh session to heartbeat in."""
        for member in group.members.values():
            self._schedule_expiry(group, member, member.session_timeout_ms)

    def unload(self, group: ClassicGroup) -> None:
        """Cancel every timer of ``group`` and answer its waiting requests (shutdown or
        deletion)."""
        for handle in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            _cancel(handle)
        group.join_timer = group.sync_timer = None
        group.pending_members.clear()
        for member in group.members.values():
            _cancel(member.expiry)
            _complete(member.join_waiter, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            _complete(member.sync_waiter, SyncResult(ErrorCode.NOT_COORDINATOR))

    async def drain(self) -> None:
        """Wait for group writes in flight (bounded: each is one append and its flush)."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group write failed", exc_info=task.exception())

    @staticmethod
    def _later(delay_ms: int, callback: Callable, *args: object) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)


def _cancel(handle: asyncio.TimerHandle | None) -> None:
    if handle is not None:
        handle.cancel()


def _complete(waiter: asyncio.Future | None, result: object) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)
