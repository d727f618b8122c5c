"""A classic-protocol group and its members: the data Kafka's ClassicGroup keeps, with the pure
rules over it (protocol selection, who has rejoined, leader election). The coordinator drives
the state machine; nothing here does I/O or starts timers.
"""
from __future__ import annotations

import asyncio
import collections
import enum
import time
from dataclasses import dataclass, field

from commitgate.gateway.groups.subscription import subscribed_topics
from commitgate.protocol.errors import ErrorCode

CONSUMER_PROTOCOL = "consumer"  # the protocol type whose metadata lists subscribed topics


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[Member] = field(default_factory=list)  # only the leader gets them
    skip_assignment: bool = False  # v9+: a static leader rejoined a Stable group (KIP-814)


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (assignor name, subscription metadata), preferred first
    assignment: bytes = b""
    is_new: bool = False  # joined but no generation yet: expires after the new-member timeout
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None
    expiry: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()

    def metadata(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


def now_ms() -> int:
    return int(time.time() * 1000)


class ClassicGroup:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms()
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}  # KIP-394 round trip
        self.pending_sync: set[str] = set()  # members of this generation yet to send SyncGroup
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None
        self.initial_delay = False  # the first join phase of an Empty group is running
        self.new_member_added = False  # ... and a member joined during its current delay

    # ---- state -----------------------------------------------------------------------------

    def transition(self, state: GroupState) -> None:
        self.state = state
        self.state_timestamp = now_ms()

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                              GroupState.EMPTY)

    # ---- members ---------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader is None:
            self.leader = member.member_id
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def replace_static(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: it keeps its place and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember: a static member must present its current id."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def all_joined(self) -> bool:
        return not self.pending_members and \
            all(m.awaiting_join for m in self.members.values())

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did (Kafka's
        maybeElectNewJoinedLeader)."""
        leader = self.members.get(self.leader) if self.leader else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        self.leader = joined.member_id if joined else self.leader
        return joined is not None

    # ---- protocols ---------------------------------------------------------------------------

    def _protocol_counts(self) -> collections.Counter:
        return collections.Counter(name for m in self.members.values() for name, _ in m.protocols)

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        counts = self._protocol_counts()
        return protocol_type == self.protocol_type and \
            any(counts[name] == len(self.members) for name, _ in protocols)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        counts = self._protocol_counts()
        candidates = {name for name, n in counts.items() if n == len(self.members)}
        votes = collections.Counter(m.vote(candidates) for m in self.members.values())
        return max(sorted(votes), key=lambda name: votes[name])

    def subscribed(self, topic: str) -> bool:
        """True when a member of a "consumer" group subscribes to ``topic`` (OffsetDelete and
        offset expiry leave such offsets alone)."""
        if self.protocol_type != CONSUMER_PROTOCOL or self.protocol_name is None:
            return False
        return any(topic in subscribed_topics(m.metadata(self.protocol_name))
                   for m in self.members.values())

    def next_generation(self) -> None:
        self.generation += 1
        self.pending_sync = set(self.members)
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)
