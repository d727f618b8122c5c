"""Which topic a group request names (by name, or by id from OffsetCommit/OffsetFetch v10) and
whether its partition exists: Kafka checks that before the coordinator sees a commit."""
from __future__ import annotations

import uuid
from typing import Protocol

from commitgate.engine.topic_table import TopicRecord
from commitgate.protocol.errors import ErrorCode


class Topics(Protocol):
    """The broker's topic lookups (``gateway/broker.py``, above this package, passes itself)."""

    def topic(self, name: str) -> TopicRecord | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None: ...


def topic_name(broker: Topics, name: str | None, topic_id: uuid.UUID | None,
               by_id: bool) -> str | None:
    """The topic's name, or None for an unknown topic id."""
    if not by_id:
        return name
    record = broker.topic_by_id(topic_id) if topic_id is not None else None
    return record.name if record is not None else None


def partition_error(broker: Topics, name: str | None, partition: int, by_id: bool) -> ErrorCode:
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topic = broker.topic(name)
    if topic is None or not 0 <= partition < topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def topic_id_of(broker: Topics, name: str) -> uuid.UUID | None:
    record = broker.topic(name)
    return uuid.UUID(record.topic_id) if record is not None else None
