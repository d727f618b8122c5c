"""DescribeProducers (key 61), v0: the idempotent and transactional producers each partition
keeps state for (gateway/producer_state.py), with the first offset of their open transaction
there (gateway/partition_txns.py).

Errors are Kafka's (KafkaApis.handleDescribeProducersRequest): an illegal topic name is
INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION with Kafka's message, an
unknown partition of a known topic the same code without one. The producer state keeps neither a
marker's coordinator epoch nor its timestamp: every marker CommitGate writes has coordinator
epoch 0, so a producer is shown with 0 once a marker is known to have reached the partition (its
state holds only a marker, or it is transactional with no transaction open there), else -1; the
last timestamp is the last data batch's (-1 when only a marker is known).
"""
from __future__ import annotations

from commitgate.engine.topic_table import topic_name_error
from commitgate.gateway.broker import Broker
from commitgate.gateway.producer_state import ProducerEntry
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 61
VERSIONS = (0, 0)
MARKER_COORDINATOR_EPOCH = 0  # what gateway/transactions/markers.py writes in every marker
NO_COORDINATOR_EPOCH = -1
UNKNOWN_TOPIC = "This server does not host this topic-partition."

Response = messages.get("DescribeProducersResponse").cls


def _state(broker: Broker, pid: int, entry: ProducerEntry, txn_start: int | None) -> object:
    marker_seen = not entry.batches or (txn_start is None and
                                        pid in broker.transactions.by_producer)
    return Response.ProducerState(
        producer_id=pid, producer_epoch=entry.epoch,
        last_sequence=entry.last_seq if entry.batches else -1,
        last_timestamp=entry.last_timestamp if entry.batches else -1,
        coordinator_epoch=MARKER_COORDINATOR_EPOCH if marker_seen else NO_COORDINATOR_EPOCH,
        current_txn_start_offset=-1 if txn_start is None else txn_start)


def _producers(broker: Broker, topic_id: str, partitions: set[int]) -> dict[int, list]:
    """The active producers of the asked partitions, in one pass over the producer state."""
    found: dict[int, list] = {p: [] for p in partitions}
    open_txns = {p: broker.producers.txns.open_producers((topic_id, p)) for p in partitions}
    for (pid, tid, partition), entry in broker.producers.entries.items():
        if tid == topic_id and partition in found:
            found[partition].append(
                _state(broker, pid, entry, open_txns[partition].get(pid)))
    return found


def _topic(broker: Broker, wanted) -> object:
    name, indexes = wanted.name, wanted.partition_indexes
    invalid = topic_name_error(name)
    record = broker.topic(name) if invalid is None else None
    if record is None:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        message = f"Topic name is invalid: {invalid}" if invalid else UNKNOWN_TOPIC
        return Response.TopicResponse(name=name, partitions=[
            Response.PartitionResponse(partition_index=p, error_code=code, error_message=message,
                                       active_producers=[]) for p in indexes])
    known = {p for p in indexes if 0 <= p < record.partitions}
    producers = _producers(broker, record.topic_id, known)
    return Response.TopicResponse(name=name, partitions=[
        Response.PartitionResponse(
            partition_index=p, error_message=None,
            error_code=ErrorCode.NONE if p in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            active_producers=producers.get(p, []))
        for p in indexes])


def _denied(wanted) -> object:
    return Response.TopicResponse(name=wanted.name, partitions=[
        Response.PartitionResponse(partition_index=p,
                                   error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message=None, active_producers=[])
        for p in wanted.partition_indexes])


async def handle(ctx: RequestContext, request) -> object:
    return Response(throttle_time_ms=0, topics=[
        _topic(ctx.broker, t) if ctx.allowed(READ, TOPIC, t.name) else _denied(t)
        for t in request.topics])
