"""A KIP-848 consumer group (``group.protocol=consumer``) and its members: the data Kafka's
ConsumerGroup keeps and the pure rules over it (group state, who owns which partition at which
epoch, and the reconciliation of one member towards its target assignment, as Kafka's
CurrentAssignmentBuilder). The heartbeat state machine in ``consumer_membership`` drives it;
nothing here does I/O or starts timers.

Assignments are ``{topic id: set of partitions}``: the protocol names topics by id.
"""
from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field, replace

from commitgate.gateway.groups.consumer_regex import RegexResolutions

Assignment = dict[uuid.UUID, set[int]]
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member left for a while and keeps its partitions


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch moved past the target assignment's
    RECONCILING = "Reconciling"  # some member has not reached the target assignment
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waits for the member to give some up
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for other members to give some up


@dataclass(eq=False, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed: tuple[str, ...] = ()
    regex: str | None = None  # SubscribedTopicRegex (v1); None or "": none
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.epoch == epoch

    def owned(self) -> list[tuple[uuid.UUID, int]]:
        """Every partition this member holds: assigned or still to be revoked."""
        return pairs(self.assigned) + pairs(self.pending_revocation)


def pairs(assignment: Assignment) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for t, parts in assignment.items() for p in parts]


def copy_assignment(assignment: Assignment) -> Assignment:
    return {t: set(p) for t, p in assignment.items() if p}


def owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, partitions: Assignment) -> bool:
    """Whether the partitions a member reports (None: not reported) include any of these."""
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, parts in owned for p in parts)


def is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, target: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in target.get(t, ()) for t, parts in owned for p in parts)


class ConsumerGroup:
    def __init__(self, group_id: str, epoch: int = 0) -> None:
        self.group_id = group_id
        self.epoch = epoch
        self.assignment_epoch = epoch
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> its target assignment
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}  # subscribed: name -> (id, count)
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}  # held -> owner's epoch
        self.regexes = RegexResolutions()
        self.dead = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """The topics a member subscribes to: its names and what its regex resolves to."""
        names = frozenset(member.subscribed)
        return names | self.regexes.topics.get(member.regex, frozenset()) if member.regex \
            else names

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def subscribed_regexes(self) -> set[str]:
        return {m.regex for m in self.members.values() if m.regex}

    def preferred_assignor(self) -> str | None:
        """The server assignor most members ask for (Kafka's rule), None when none asks."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        return max(sorted(votes), key=votes.__getitem__) if votes else None

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding a partition, -1 when it is free."""
        return self.partition_epochs.get((topic_id, partition), -1)

    # ---- members -----------------------------------------------------------------------------

    def put(self, member: ConsumerMember) -> None:
        """Add or replace a member, keeping the partition owners' epochs in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for key in member.owned():
            self.partition_epochs[key] = member.epoch

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def _release(self, member: ConsumerMember) -> None:
        for key in member.owned():
            if self.partition_epochs.get(key) == member.epoch:
                del self.partition_epochs[key]

    def replace_static(self, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member came back under a new member id: it takes the old one's place,
        assignment and target, at epoch 0 (Kafka's static member replacement)."""
        target = self.target.get(old.member_id)
        self.remove(old.member_id)
        new = replace(old, member_id=member_id, epoch=0, previous_epoch=0, session_timer=None,
                      rebalance_timer=None, assigned=copy_assignment(old.assigned),
                      pending_revocation={})
        self.put(new)
        if target is not None:
            self.target[member_id] = target
        return new


def reconcile(group: ConsumerGroup, member: ConsumerMember,
              owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    """The member moved one step towards the group's target assignment (Kafka's
    CurrentAssignmentBuilder): partitions leave a member first (it must report them gone), and
    come to their new owner only once nobody else holds them."""
    target_epoch = group.assignment_epoch
    if member.reconciled_to(target_epoch):
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(group, member, member.epoch + 1, owned)
    return _next(group, member, member.epoch, owned)


def _next(group: ConsumerGroup, member: ConsumerMember, epoch: int,
          owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    target = group.target.get(member.member_id, {})
    assigned: Assignment = {}
    revoking: Assignment = {}
    incoming: Assignment = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted, held = target.get(topic, set()), member.assigned.get(topic, set())
        keep = held & wanted
        new = {p for p in wanted - keep if group.partition_epoch(topic, p) == -1}
        unreleased = unreleased or len(new) < len(wanted - keep)
        assigned[topic], revoking[topic], incoming[topic] = keep, held - keep, new
    revoking = copy_assignment(revoking)
    if revoking and owns_any(owned, revoking):
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
    for topic, parts in incoming.items():
        assigned[topic] |= parts
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, state, group.assignment_epoch, assigned, {})


def _moved(member: ConsumerMember, state: MemberState, epoch: int, assigned: Assignment,
           revoking: Assignment) -> ConsumerMember:
    return replace(member, state=state, epoch=epoch, previous_epoch=member.epoch,
                   assigned=copy_assignment(assigned), pending_revocation=revoking)
