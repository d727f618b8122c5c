"""The server-side assignors of KIP-848 consumer groups (``group.consumer.assignors``): they
turn the members' subscriptions into a target assignment.

``uniform`` spreads all subscribed partitions as evenly as it can and keeps partitions where
they are when that stays balanced (few revocations on a rebalance); ``range`` gives each
member of a topic's subscribers a contiguous range of its partitions, by member id order.
Both are deterministic for the same input.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable

from commitgate.gateway.groups.consumer_group import Assignment

Topics = dict[str, tuple[uuid.UUID, int]]  # subscribed topic name -> (id, partition count)
Subscriptions = dict[str, tuple[str, ...]]  # member id -> subscribed topic names
Assignor = Callable[[Subscriptions, Topics, dict[str, Assignment]], dict[str, Assignment]]


def range_assign(members: Subscriptions, topics: Topics,
                 _current: dict[str, Assignment]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    for name, (topic_id, count) in sorted(topics.items()):
        subscribers = sorted(m for m, subscribed in members.items() if name in subscribed)
        if not subscribers:
            continue
        size, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            end = start + size + (1 if i < extra else 0)
            if end > start:
                out[member][topic_id] = set(range(start, end))
            start = end
    return out


def uniform_assign(members: Subscriptions, topics: Topics,
                   current: dict[str, Assignment]) -> dict[str, Assignment]:
    partitions = [(topic_id, p) for name, (topic_id, count) in sorted(topics.items())
                  for p in range(count)]
    eligible = {tp: [m for m in sorted(members) if _subscribes(members[m], topics, tp[0])]
                for tp in partitions}
    kept = _sticky(members, eligible, current)
    quotas = _quotas(len([tp for tp in partitions if eligible[tp]]), kept)
    out: dict[str, list[tuple[uuid.UUID, int]]] = {
        m: sorted(kept[m])[:quotas[m]] for m in members}
    taken = {tp for held in out.values() for tp in held}
    for tp in partitions:
        if tp in taken or not eligible[tp]:
            continue
        # the eligible member furthest below its quota, then the least loaded, by id
        owner = min(eligible[tp], key=lambda m: (len(out[m]) >= quotas[m], len(out[m]), m))
        out[owner].append(tp)
    return {m: _as_assignment(held) for m, held in out.items()}


def _subscribes(subscribed: tuple[str, ...], topics: Topics, topic_id: uuid.UUID) -> bool:
    return any(topics[name][0] == topic_id for name in subscribed if name in topics)


def _sticky(members: Subscriptions, eligible: dict[tuple[uuid.UUID, int], list[str]],
            current: dict[str, Assignment]) -> dict[str, set[tuple[uuid.UUID, int]]]:
    """What each member had in the previous target and may keep (each partition once)."""
    kept: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    seen: set[tuple[uuid.UUID, int]] = set()
    for member in sorted(members):
        for topic_id, parts in current.get(member, {}).items():
            for p in parts:
                tp = (topic_id, p)
                if member in eligible.get(tp, ()) and tp not in seen:
                    kept[member].add(tp)
                    seen.add(tp)
    return kept


def _quotas(total: int, kept: dict[str, set]) -> dict[str, int]:
    """Each member gets total // n partitions, ``total % n`` of them one more: those that
    hold the most already, so fewer partitions move."""
    if not kept:
        return {}
    base, extra = divmod(total, len(kept))
    ranked = sorted(kept, key=lambda m: (-len(kept[m]), m))
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}


def _as_assignment(held: list[tuple[uuid.UUID, int]]) -> Assignment:
    out: Assignment = {}
    for topic_id, p in held:
        out.setdefault(topic_id, set()).add(p)
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
