"""``commitgate groups``: the operator's view of consumer groups, over the wire from any broker
(kafka-python's admin client): list them, describe one (state, protocol, members and their
assignment) with the lag of each partition (log end offset minus committed offset).

KIP-848 groups (``group.protocol=consumer``) are described with ConsumerGroupDescribe (group
epoch, assignment epoch, assignor, member epochs), which kafka-python does not send: the raw
wire client asks the bootstrap broker, which coordinates every group in CommitGate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

groups_app = typer.Typer(help="Consumer groups: list, describe with members and lag.",
                         no_args_is_help=True)
Bootstrap = Annotated[str, typer.Option(help="a broker's host:port")]
DEFAULT_BOOTSTRAP = "localhost:9092"
CONSUMER_GROUP_DESCRIBE = 69


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


def _admin(bootstrap: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="commitgate-groups")


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


def consumer_group(bootstrap: str, group: str):
    """The KIP-848 group's ConsumerGroupDescribe entry, None when it is no consumer group."""
    from compat_tests.wire import WireClient
    from protocol import messages
    from protocol.errors import ErrorCode

    request = messages.get("ConsumerGroupDescribeRequest").cls(group_ids=[group])
    with WireClient(bootstrap) as client:
        [described] = client.request(CONSUMER_GROUP_DESCRIBE, 0, request).groups
    return None if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND else described


def _consumer_owners(members: list) -> dict[tuple[str, int], str]:
    return {(t.topic_name, p): m.member_id for m in members
            for t in m.assignment.topic_partitions for p in t.partitions}


@groups_app.command("list", help="Every group with its state and protocol type.")
def list_groups(bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    admin = _admin(bootstrap)
    try:
        listed = admin.list_groups()
    finally:
        admin.close()
    table = Table("group", "state", "type", "protocol type")
    for g in sorted(listed, key=lambda g: g["group_id"]):
        table.add_row(g["group_id"], g.get("group_state") or "", g.get("group_type") or "",
                      g.get("protocol_type") or "")
    Console().print(table)


@groups_app.command("describe", help="One group: state, protocol, members, lag per partition.")
def describe_group(group: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    kip848 = consumer_group(bootstrap, group)
    admin = _admin(bootstrap)
    try:
        described = None if kip848 else admin.describe_groups([group])[group]
        rows = lag_rows(admin, group, _consumer_owners(kip848.members) if kip848
                        else _classic_owners(described))
    finally:
        admin.close()
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
