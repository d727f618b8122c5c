"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ends in a partition's log (KIP-320:
consumers check their position for truncation after a leader change).

Every partition has had one leader epoch, 0, from its creation, so Kafka's epoch cache
(LeaderEpochFileCache.endOffsetFor) answers: epoch 0 ends at the log end; an epoch above it, or
-1, is UNDEFINED (-1, -1); an epoch below -1 starts before the first known one, which answers
the requested epoch with the log start. A current leader epoch other than 0 (-1: not given) is
UNKNOWN_LEADER_EPOCH when newer, FENCED_LEADER_EPOCH when older; an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION.
"""
from __future__ import annotations

from commitgate.gateway.broker import LEADER_EPOCH, Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 23
VERSIONS = (2, 4)
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET; also "no current epoch"

Response = messages.get("OffsetForLeaderEpochResponse").cls


def _current_epoch_error(current: int) -> ErrorCode:
    if current == UNDEFINED or current == LEADER_EPOCH:
        return ErrorCode.NONE
    return ErrorCode.UNKNOWN_LEADER_EPOCH if current > LEADER_EPOCH else \
        ErrorCode.FENCED_LEADER_EPOCH


def _end(broker: Broker, topic: str, partition: int, epoch: int) -> tuple[int, int]:
    """(epoch, end offset) as the epoch cache answers it."""
    if epoch == LEADER_EPOCH:
        return epoch, broker.store.log_end_offset(topic, partition)
    if epoch < UNDEFINED:
        return epoch, broker.store.log_start_offset(topic, partition)
    return UNDEFINED, UNDEFINED


def _partition(broker: Broker, topic: str, asked) -> object:
    out = Response.EpochEndOffset(partition=asked.partition, leader_epoch=UNDEFINED,
                                  end_offset=UNDEFINED)
    record = broker.topic(topic)
    if record is None or not 0 <= asked.partition < record.partitions:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    out.error_code = _current_epoch_error(asked.current_leader_epoch)
    if out.error_code is ErrorCode.NONE:
        out.leader_epoch, out.end_offset = _end(broker, topic, asked.partition, asked.leader_epoch)
    return out


async def handle(ctx: RequestContext, request) -> object:
    return Response(throttle_time_ms=0, topics=[
        Response.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            _partition(ctx.broker, t.topic, p) if ctx.allowed(DESCRIBE, TOPIC, t.topic) else
            Response.EpochEndOffset(partition=p.partition, leader_epoch=UNDEFINED,
                                    end_offset=UNDEFINED,
                                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t.partitions])
        for t in request.topics])
