"""``commitgate groups``: the operator's view of consumer groups, over the wire from any broker
(kafka-python's admin client): list them, describe one (state, protocol, members and their
assignment) with the lag of each partition (log end offset minus committed offset)."""
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


def _owners(described: dict) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the member it is assigned to."""
    owners = {}
    for member in described.get("members") or []:
        assignment = member.get("member_assignment") or {}
        for entry in assignment.get("assigned_partitions", []) if isinstance(assignment, dict) \
                else []:
            for partition in entry["partitions"]:
                owners[(entry["topic"], partition)] = member["member_id"]
    return owners


def lag_rows(admin, group: str, described: dict) -> list[PartitionLag]:
    from kafka.admin import OffsetSpec

    committed = admin.list_group_offsets(group).get(group, {})
    owners = _owners(described)
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
    admin = _admin(bootstrap)
    try:
        described = admin.describe_groups([group])[group]
        rows = lag_rows(admin, group, described)
    finally:
        admin.close()
    console = Console()
    console.print(f"group [bold]{group}[/]: {described['group_state']}, protocol "
                  f"{described.get('protocol_type') or '-'}/{described.get('protocol_data') or '-'}"
                  f", {len(described.get('members') or [])} members")
    members = Table("member", "instance", "client", "host", "assigned")
    for member in described.get("members") or []:
        assigned = _owners({"members": [member]})
        members.add_row(member["member_id"], member.get("group_instance_id") or "-",
                        member["client_id"], member["client_host"],
                        ", ".join(f"{t}-{p}" for t, p in sorted(assigned)) or "-")
    console.print(members)
    lag = Table("topic", "partition", "committed", "log end", "lag", "member")
    for row in rows:
        lag.add_row(row.topic, str(row.partition), str(row.committed) if row.committed >= 0
                    else "-", str(row.end), str(row.lag), row.owner)
    console.print(lag)
