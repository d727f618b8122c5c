"""``commitgate group``: the operator's view of consumer groups, over the wire from any broker
with kafka-python's admin client: list them, describe one (state, protocol, members and their
assignment) with the lag of each partition (log end offset minus committed offset), reset its
offsets (to the earliest, the latest, an offset or a time; a dry run unless ``--execute``, as
Kafka's kafka-consumer-groups does) and delete groups.

KIP-848 groups (``group.protocol=consumer``) are described with ConsumerGroupDescribe (group
epoch, assignment epoch, assignor, member epochs), which kafka-python has no message class for:
``ConsumerGroupDescribeRequest``/``Response`` below are kafka-python messages built from the
schemas under protocol/schemas, sent to the group's coordinator by the admin client's own
connection manager (which kafka-python's public API does not expose)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

import typer
from kafka.protocol.api_message import ApiMessage
from rich.console import Console
from rich.table import Table

from commitgate.cli.common import (
    DEFAULT_BOOTSTRAP,
    AsJson,
    Bootstrap,
    admin_client,
    check_results,
    fail,
    print_json,
)
from commitgate.gateway.admin.query import parse_time
from commitgate.protocol import schemas as own_schemas

groups_app = typer.Typer(help="Consumer groups: list, describe with members and lag, reset "
                              "offsets, delete.", no_args_is_help=True)
INACTIVE = {"Empty", "Dead"}


class ConsumerGroupDescribeRequest(ApiMessage, load_json=own_schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=own_schemas):
    pass


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int
    end: int
    owner: str

    @property
    def lag(self) -> int:
        return max(self.end - self.committed, 0) if self.committed >= 0 else self.end


def _classic_owners(described: dict) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the member it is assigned to."""
    owners = {}
    for member in described.get("members") or []:
        assignment = member.get("member_assignment") or {}
        for entry in assignment.get("assigned_partitions", []) if isinstance(assignment, dict) \
                else []:
            for partition in entry["partitions"]:
                owners[(entry["topic"], partition)] = member["member_id"]
    return owners


def lag_rows(admin, group: str, owners: dict[tuple[str, int], str]) -> list[PartitionLag]:
    from kafka.admin import OffsetSpec

    committed = admin.list_group_offsets(group).get(group, {})
    partitions = set(committed) | {_tp(t, p) for t, p in owners}
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions}) \
        if partitions else {}
    return [PartitionLag(tp.topic, tp.partition,
                         committed[tp].offset if tp in committed else -1, ends[tp].offset,
                         owners.get((tp.topic, tp.partition), "-"))
            for tp in sorted(partitions)]


def _tp(topic: str, partition: int):
    from kafka import TopicPartition

    return TopicPartition(topic, partition)


def consumer_group(admin, group: str):
    """The KIP-848 group's ConsumerGroupDescribe entry, None when it is no consumer group (or
    the broker does not know the API)."""
    from kafka.errors import GroupIdNotFoundError, IncompatibleBrokerVersion

    async def describe():
        node = await admin._find_coordinator_id(group)
        request = ConsumerGroupDescribeRequest(group_ids=[group],
                                               include_authorized_operations=False)
        return await admin._manager.send(request, node_id=node)

    try:
        [described] = admin._manager.run(describe).groups
    except IncompatibleBrokerVersion:
        return None
    return None if described.error_code == GroupIdNotFoundError.errno else described


def _consumer_owners(members: list) -> dict[tuple[str, int], str]:
    return {(t.topic_name, p): m.member_id for m in members
            for t in m.assignment.topic_partitions for p in t.partitions}


@groups_app.command("list", help="Every group with its state and protocol type.")
def list_groups(bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, as_json: AsJson = False) -> None:
    with admin_client(bootstrap) as admin:
        listed = admin.list_groups()
    rows = [{"group": g["group_id"], "state": g.get("group_state") or "",
             "type": g.get("group_type") or "", "protocol_type": g.get("protocol_type") or ""}
            for g in sorted(listed, key=lambda g: g["group_id"])]
    if as_json:
        print_json(rows)
        return
    table = Table("group", "state", "type", "protocol type")
    for row in rows:
        table.add_row(*row.values())
    Console().print(table)


@groups_app.command("describe", help="One group: state, protocol, members, lag per partition.")
def describe_group(group: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, as_json: AsJson = False
                   ) -> None:
    with admin_client(bootstrap) as admin:
        kip848 = consumer_group(admin, group)
        described = None if kip848 else admin.describe_groups([group])[group]
        rows = lag_rows(admin, group, _consumer_owners(kip848.members) if kip848
                        else _classic_owners(described))
    if as_json:
        state = kip848.group_state if kip848 else described["group_state"]
        print_json({"group": group, "type": "consumer" if kip848 else "classic",
                    "state": state, "lag": [asdict(r) | {"lag": r.lag} for r in rows]})
        return
    console = Console()
    console.print(_consumer_members(group, kip848, console) if kip848
                  else _classic_members(group, described, console))
    lag = Table("topic", "partition", "committed", "log end", "lag", "member")
    for row in rows:
        lag.add_row(row.topic, str(row.partition), str(row.committed) if row.committed >= 0
                    else "-", str(row.end), str(row.lag), row.owner)
    console.print(lag)


def _classic_members(group: str, described: dict, console: Console) -> Table:
    console.print(f"group [bold]{group}[/] (classic): {described['group_state']}, protocol "
                  f"{described.get('protocol_type') or '-'}/{described.get('protocol_data') or '-'}"
                  f", {len(described.get('members') or [])} members")
    members = Table("member", "instance", "client", "host", "assigned")
    for member in described.get("members") or []:
        assigned = _classic_owners({"members": [member]})
        members.add_row(member["member_id"], member.get("group_instance_id") or "-",
                        member["client_id"], member["client_host"], _partitions(assigned))
    return members


def _consumer_members(group: str, described, console: Console) -> Table:
    console.print(f"group [bold]{group}[/] (consumer): {described.group_state}, group epoch "
                  f"{described.group_epoch}, assignment epoch {described.assignment_epoch}, "
                  f"assignor {described.assignor_name or '-'}, {len(described.members)} members")
    members = Table("member", "instance", "client", "host", "epoch", "assigned")
    for member in described.members:
        assigned = _consumer_owners([member])
        members.add_row(member.member_id, member.instance_id or "-", member.client_id,
                        member.client_host, str(member.member_epoch), _partitions(assigned))
    return members


def _partitions(owners: dict[tuple[str, int], str]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(owners)) or "-"


@groups_app.command("reset-offsets", help="Reset an inactive group's committed offsets to the "
                                          "earliest, the latest, an offset or a time: shows "
                                          "the new offsets, applies them with --execute.")
def reset_offsets(
    group: str,
    topic: Annotated[list[str], typer.Option("--topic", "-t", help="TOPIC or TOPIC:P,P; may "
                                             "repeat")] = [],  # noqa: B006
    all_topics: Annotated[bool, typer.Option("--all-topics", help="every topic the group has "
                                             "offsets for")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", min=0)] = None,
    to_datetime: Annotated[str | None, typer.Option("--to-datetime", help="ms, ISO 8601 or "
                                                    "-15m/-2h/-1d")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="apply (default: a dry run)")
                       ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    as_json: AsJson = False,
) -> None:
    if [to_earliest, to_latest, to_offset is not None, to_datetime is not None].count(True) != 1:
        raise typer.BadParameter("give one of --to-earliest, --to-latest, --to-offset and "
                                 "--to-datetime")
    if bool(topic) == all_topics:
        raise typer.BadParameter("give --topic or --all-topics")
    target = _target(to_earliest, to_latest, to_offset, to_datetime)
    with admin_client(bootstrap) as admin:
        _require_inactive(admin, group)
        committed = admin.list_group_offsets(group).get(group, {})
        tps = sorted(committed) if all_topics else _chosen(admin, topic)
        new = _new_offsets(admin, tps, target)
        if execute:
            _commit(admin, group, new)
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "current": committed[tp].offset if tp in committed else None,
             "new": new[tp]} for tp in tps]
    if as_json:
        print_json({"group": group, "executed": execute, "partitions": rows})
        return
    table = Table("topic", "partition", "current", "new")
    for row in rows:
        table.add_row(row["topic"], str(row["partition"]),
                      "-" if row["current"] is None else str(row["current"]), str(row["new"]))
    out = Console()
    out.print(table)
    out.print(f"offsets of group {group} reset" if execute else
              "dry run: nothing changed (add --execute to apply)")


def _target(earliest: bool, latest: bool, offset: int | None, when: str | None):
    """What kafka-python's ListOffsets takes (OffsetSpec, OffsetTimestamp), or the offset."""
    from kafka.admin import OffsetSpec, OffsetTimestamp

    if earliest:
        return OffsetSpec.EARLIEST
    if latest:
        return OffsetSpec.LATEST
    if offset is not None:
        return offset
    try:
        return OffsetTimestamp(parse_time(when))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _require_inactive(admin, group: str) -> None:
    """Kafka's rule: offsets are reset only while no member could commit over them."""
    state = next((g.get("group_state") for g in admin.list_groups() if g["group_id"] == group),
                 None)
    if state is not None and state not in INACTIVE:
        fail(f"Assignments can only be reset if the group '{group}' is inactive, but the "
             f"current state is {state}.")


def _chosen(admin, topics: list[str]) -> list:
    """TOPIC (every partition) or TOPIC:P,P."""
    tps = []
    for text in topics:
        name, sep, listed = text.partition(":")
        if sep:
            try:
                tps += [_tp(name, int(p)) for p in listed.split(",")]
            except ValueError:
                raise typer.BadParameter(f"--topic takes TOPIC or TOPIC:P,P, got {text!r}"
                                         ) from None
            continue
        [meta] = admin.describe_topics([name])
        check_results([meta])
        tps += [_tp(name, p["partition_index"]) for p in meta["partitions"]]
    return sorted(set(tps))


def _new_offsets(admin, tps: list, target) -> dict:
    """Each partition's new offset, kept within [log start, log end] as Kafka's tool keeps it
    (a time past the last record: the log end)."""
    from kafka.admin import OffsetSpec

    if not tps:
        return {}
    starts = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    if type(target) is int:  # an offset: OffsetTimestamp is an int too
        wanted = {tp: target for tp in tps}
    else:
        found = admin.list_partition_offsets({tp: target for tp in tps})
        wanted = {tp: found[tp].offset if found[tp].offset >= 0 else ends[tp].offset
                  for tp in tps}
    return {tp: min(max(wanted[tp], starts[tp].offset), ends[tp].offset) for tp in tps}


def _commit(admin, group: str, offsets: dict) -> None:
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    errors = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, "", -1)
                                               for tp, offset in offsets.items()})
    failed = {tp: e for tp, e in errors.items() if e is not NoError}
    if failed:
        tp, error = next(iter(failed.items()))
        fail(f"{len(failed)} offsets of group {group} not reset; {tp.topic}-{tp.partition}: "
             f"{error.__name__}: {error.description}")


@groups_app.command("delete", help="Delete inactive groups and their committed offsets.")
def delete_groups(groups: list[str], bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    with admin_client(bootstrap) as admin:
        results = admin.delete_groups(groups)
    out = Console()
    failed = {g: outcome for g, outcome in results.items() if outcome != "OK"}  # else an error name
    for group_id in results.keys() - failed.keys():
        out.print(f"deleted group {group_id}")
    for group_id, outcome in failed.items():
        out.print(f"[red]group {group_id} not deleted:[/] {outcome}")
    if failed:
        raise typer.Exit(1)
