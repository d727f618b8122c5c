"""Which ``__consumer_offsets`` records a change of a KIP-848 group needs, as Kafka writes them:
a group is the image before a change plus the records that turn it into the group after it
(member metadata, group epoch, target assignment per member and its epoch, current member
assignment; tombstones for members that left), and replaying the records rebuilds it.

Records are compared by their encoding, so a heartbeat that changes nothing writes nothing.
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from commitgate.gateway.groups.consumer_group import Assignment, ConsumerGroup, ConsumerMember
from commitgate.gateway.groups.records import (
    CURRENT_ASSIGNMENT_KEY_VERSION,
    MEMBER_KEY_VERSION,
    TARGET_MEMBER_KEY_VERSION,
    Key,
    consumer_group_key,
    current_value,
    epoch_value,
    member_key,
    member_value,
    read_current_value,
    read_epoch_value,
    read_member_value,
    read_target_value,
    target_epoch_key,
    target_value,
)

Record = tuple[bytes, bytes | None]
KINDS = frozenset({"consumer_group", "target_epoch", "member", "target", "current"})


class GroupImage(NamedTuple):
    epoch: int
    assignment_epoch: int
    members: dict[str, ConsumerMember]  # members are replaced on change, never mutated
    target: dict[str, Assignment]


def image(group: ConsumerGroup) -> GroupImage:
    return GroupImage(group.epoch, group.assignment_epoch, dict(group.members),
                      dict(group.target))


def changes(group: ConsumerGroup, before: GroupImage) -> list[Record]:
    """The records from ``before`` to the group as it is now, in Kafka's order."""
    gid = group.group_id
    records = [(member_key(v, gid, m), None) for m in before.members if m not in group.members
               for v in (CURRENT_ASSIGNMENT_KEY_VERSION, TARGET_MEMBER_KEY_VERSION,
                         MEMBER_KEY_VERSION)]
    records += _changed(MEMBER_KEY_VERSION, gid, before.members, group.members, member_value)
    if group.epoch != before.epoch:
        records.append((consumer_group_key(gid), epoch_value(group.epoch)))
    records += _changed(TARGET_MEMBER_KEY_VERSION, gid, before.target, group.target,
                        target_value)
    if group.assignment_epoch != before.assignment_epoch:
        records.append((target_epoch_key(gid), epoch_value(group.assignment_epoch)))
    records += _changed(CURRENT_ASSIGNMENT_KEY_VERSION, gid, before.members, group.members,
                        current_value)
    return records


def _changed(version: int, gid: str, before: dict, now: dict, encode) -> list[Record]:
    records = []
    for member_id, value in now.items():
        old = before.get(member_id)
        if old is value:
            continue
        data = encode(value)
        if old is None or encode(old) != data:
            records.append((member_key(version, gid, member_id), data))
    return records


def deletion(group_id: str) -> list[Record]:
    """Tombstones for an empty group (its members' records are tombstoned already)."""
    return [(target_epoch_key(group_id), None), (consumer_group_key(group_id), None)]


def replay(groups: dict[str, ConsumerGroup], key: Key, value: bytes | None) -> None:
    """Apply one record at load, in log order (Kafka's replay of consumer group records)."""
    group = groups.get(key.group)
    if value is None:
        _replay_tombstone(groups, group, key)
        return
    if key.kind == "consumer_group" and group is None:  # stores that hold only the epoch
        groups[key.group] = ConsumerGroup(key.group, read_epoch_value(value))
        return
    group = group or groups.setdefault(key.group, ConsumerGroup(key.group))
    member_id = key.topic or ""
    if key.kind == "consumer_group":
        group.epoch = read_epoch_value(value)
    elif key.kind == "target_epoch":
        group.assignment_epoch = read_epoch_value(value)
    elif key.kind == "target":
        group.target[member_id] = read_target_value(value)
    elif key.kind == "member":
        loaded = read_member_value(member_id, value)
        old = group.members.get(member_id)
        group.put(loaded if old is None else replace(
            loaded, epoch=old.epoch, previous_epoch=old.previous_epoch, state=old.state,
            assigned=old.assigned, pending_revocation=old.pending_revocation))
    else:
        current = read_current_value(value)
        group.put(replace(group.members.get(member_id) or ConsumerMember(member_id),
                          epoch=current.epoch, previous_epoch=current.previous_epoch,
                          state=current.state, assigned=current.assigned,
                          pending_revocation=current.pending_revocation))


def _replay_tombstone(groups: dict[str, ConsumerGroup], group: ConsumerGroup | None,
                      key: Key) -> None:
    """A member's metadata tombstone removes it (its assignment tombstones come first)."""
    if group is None:
        return
    if key.kind == "consumer_group":
        del groups[key.group]
    elif key.kind == "member":
        group.remove(key.topic or "")
    elif key.kind == "target":
        group.target.pop(key.topic or "", None)
