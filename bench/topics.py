"""Untimed set-up of broker benchmarks: topics created before a measurement and deleted after
it (an in-memory peer keeps every byte written otherwise)."""
from __future__ import annotations

import sys

from confluent_kafka.admin import AdminClient, NewTopic

ADMIN_TIMEOUT_S = 120.0


def _config(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "log_level": 3}  # errors only: the progress bar


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient(_config(bootstrap))  # must outlive the futures
    futures = admin.create_topics([NewTopic(topic, partitions, 1,
                                            config={"max.message.bytes": str(8 << 20)})],
                                  operation_timeout=ADMIN_TIMEOUT_S)
    for future in futures.values():
        try:
            future.result(ADMIN_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - "already exists" is fine, the rest shows later
            if "already exists" not in str(exc).lower():
                print(f"create {topic} on {bootstrap}: {exc}", file=sys.stderr)


def delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient(_config(bootstrap))
    for future in admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT_S).values():
        try:
            future.result(ADMIN_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a peer without DeleteTopics keeps the data
            print(f"delete {topic} on {bootstrap}: {exc}", file=sys.stderr)
