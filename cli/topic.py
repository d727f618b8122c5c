"""``commitgate topic``: list, describe, create, delete, alter-config, add-partitions, over the
Kafka protocol with kafka-python's admin client (any Kafka-compatible broker).

``describe`` shows each partition's leader, log start and end offsets (ListOffsets), its size
on disk (DescribeLogDirs, where the broker answers it) and every topic config with where its
value comes from (DescribeConfigs' source)."""
from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from commitgate.cli.common import (
    DEFAULT_BOOTSTRAP,
    AsJson,
    Bootstrap,
    admin_client,
    check_results,
    fail,
    key_value,
    print_json,
)

topic_app = typer.Typer(help="Topics: list, describe, create, delete, alter configs, add "
                             "partitions.", no_args_is_help=True)


@topic_app.command("list", help="Every topic with its partition count.")
def list_topics(bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, as_json: AsJson = False) -> None:
    with admin_client(bootstrap) as admin:
        described = admin.describe_topics()
    rows = sorted(({"name": t["name"], "partitions": len(t["partitions"]),
                    "internal": t["is_internal"]} for t in described), key=lambda t: t["name"])
    if as_json:
        print_json(rows)
        return
    table = Table("topic", "partitions", "internal")
    for row in rows:
        table.add_row(row["name"], str(row["partitions"]), "yes" if row["internal"] else "")
    Console().print(table)


@topic_app.command(help="Partitions with leader, log start and end offsets and size on disk; "
                        "configs with their source.")
def describe(topic: str, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, as_json: AsJson = False
             ) -> None:
    with admin_client(bootstrap) as admin:
        described = describe_topic(admin, topic)
    if as_json:
        print_json(described)
        return
    out = Console()
    out.print(f"topic [bold]{topic}[/] ({described['topic_id']}), "
              f"{len(described['partitions'])} partitions")
    table = Table("partition", "leader", "replicas", "log start", "log end", "size")
    for p in described["partitions"]:
        table.add_row(str(p["partition"]), str(p["leader"]), ",".join(map(str, p["replicas"])),
                      str(p["log_start_offset"]), str(p["log_end_offset"]),
                      "-" if p["size_bytes"] is None else str(p["size_bytes"]))
    out.print(table)
    configs = Table("config", "value", "source")
    for c in described["configs"]:
        configs.add_row(c["name"], "" if c["value"] is None else c["value"], c["source"])
    out.print(configs)


def describe_topic(admin, topic: str) -> dict:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec

    meta = _metadata(admin, topic)
    partitions = sorted(meta["partitions"], key=lambda p: p["partition_index"])
    tps = [TopicPartition(topic, p["partition_index"]) for p in partitions]
    starts = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    sizes = _sizes(admin, topic)
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource], config_filter="all")["topic"][topic]
    return {"topic": topic, "topic_id": str(meta.get("topic_id")), "partitions": [
        {"partition": tp.partition, "leader": p["leader_id"], "replicas": p["replica_nodes"],
         "log_start_offset": starts[tp].offset, "log_end_offset": ends[tp].offset,
         "size_bytes": sizes.get(tp.partition)} for tp, p in zip(tps, partitions)],
        "configs": [{"name": name, "value": c["value"], "source": c["config_source"]}
                    for name, c in sorted(configs.items())]}


def _metadata(admin, topic: str) -> dict:
    [meta] = admin.describe_topics([topic])
    check_results([meta])
    return meta


def _sizes(admin, topic: str) -> dict[int, int]:
    """Partition sizes from DescribeLogDirs (summed over log directories and brokers); empty
    when the broker does not answer it."""
    from kafka.errors import KafkaError

    try:
        answers = admin.describe_log_dirs()
    except KafkaError:
        return {}
    sizes: dict[int, int] = {}
    for broker in answers:
        for log_dir in broker["log_dirs"]:
            for t in log_dir["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        index = p["partition_index"]
                        sizes[index] = sizes.get(index, 0) + p["partition_size"]
    return sizes


@topic_app.command(help="Create a topic.")
def create(
    topic: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 1,
    replicas: Annotated[int, typer.Option("--replication-factor", "-r", min=1)] = 1,
    config: Annotated[list[str], typer.Option("--config", "-c", help="KEY=VALUE, may repeat")
                      ] = [],  # noqa: B006
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    from kafka.admin import NewTopic

    configs = dict(key_value(c, "--config") for c in config)
    with admin_client(bootstrap) as admin:
        created = admin.create_topics([NewTopic(topic, partitions, replicas,
                                                topic_configs=configs)], raise_errors=False)
    check_results(created["topics"])
    Console().print(f"created topic {topic} with {partitions} partitions")


@topic_app.command(help="Delete topics.")
def delete(topics: list[str], bootstrap: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    with admin_client(bootstrap) as admin:
        deleted = admin.delete_topics(topics, raise_errors=False)
    check_results(deleted["topics"])
    Console().print(f"deleted {', '.join(topics)}")


@topic_app.command("alter-config", help="Set or delete topic configs "
                                        "(IncrementalAlterConfigs).")
def alter_config(
    topic: str,
    set_: Annotated[list[str], typer.Option("--set", "-s", help="KEY=VALUE, may repeat")
                    ] = [],  # noqa: B006
    delete_: Annotated[list[str], typer.Option("--delete", "-d", help="KEY: back to its default"
                                               ", may repeat")] = [],  # noqa: B006
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    changes: dict[str, tuple[str, str | None]] = {
        k: ("SET", v) for k, v in (key_value(s, "--set") for s in set_)}
    changes |= {name: ("DELETE", None) for name in delete_}
    if not changes:
        raise typer.BadParameter("give --set KEY=VALUE or --delete KEY")
    with admin_client(bootstrap) as admin:
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, changes)],
                                     raise_on_unknown=False)
    if result["topic"][topic] != "OK":  # kafka-python's text for the resource's outcome
        fail(result["topic"][topic])
    Console().print(f"altered {len(changes)} configs of {topic}")


@topic_app.command("add-partitions", help="Add partitions to a topic (never fewer).")
def add_partitions(
    topic: str,
    num: Annotated[int, typer.Option("--num", "-n", min=1, help="partitions to add")],
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    from kafka.admin import NewPartitions

    with admin_client(bootstrap) as admin:
        total = len(_metadata(admin, topic)["partitions"]) + num
        response = admin.create_partitions({topic: NewPartitions(total)}, raise_errors=False)
    check_results([{"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
                   for r in response.results])
    Console().print(f"{topic} now has {total} partitions")
