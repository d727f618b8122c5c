"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward (the low
watermark), as Kafka's ReplicaManager.deleteRecords does on the leader.

Offset -1 means the high watermark. An offset past the high watermark, or negative other than
-1, is OFFSET_OUT_OF_RANGE; one below the current log start changes nothing and answers the
current one. Records below the new start are no longer served (fetching there is
OFFSET_OUT_OF_RANGE); their files go once no partition needs them. One broker, so the request
never waits for followers or for its timeout. Failed partitions answer low watermark -1.
A partition of an internal topic is INVALID_TOPIC_EXCEPTION, as in Kafka. The topic table is
saved once per request, off the event loop.
"""
from __future__ import annotations

import logging

from commitgate.engine import StoreStatus
from commitgate.gateway.broker import STORE_ERRORS
from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import DELETE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 21
VERSIONS = (0, 2)
INVALID_LOW_WATERMARK = -1

Response = messages.get("DeleteRecordsResponse").cls
TopicOut = Response.DeleteRecordsTopicResult
PartitionOut = Response.DeleteRecordsPartitionResult


def _denied(partition) -> object:
    return PartitionOut(partition_index=partition.partition_index,
                        low_watermark=INVALID_LOW_WATERMARK,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _out(ctx: RequestContext, topic: str, partition, done: tuple[StoreStatus, int] | None
         ) -> object:
    """The answer for one partition; ``done`` is None for an internal topic's."""
    if done is None:  # Kafka's ReplicaManager refuses it so (the answer has no message)
        log.warning("delete records of internal topic %s-%d refused for %s", topic,
                    partition.partition_index, ctx.who())
        return PartitionOut(partition_index=partition.partition_index,
                            low_watermark=INVALID_LOW_WATERMARK,
                            error_code=ErrorCode.INVALID_TOPIC_EXCEPTION)
    status, low = done
    if status is not StoreStatus.OK:
        low = INVALID_LOW_WATERMARK
        log.info("delete records of %s-%d before %d from %s refused: %s", topic,
                 partition.partition_index, partition.offset, ctx.who(), status.value)
    return PartitionOut(partition_index=partition.partition_index, low_watermark=low,
                        error_code=STORE_ERRORS[status])


async def handle(ctx: RequestContext, request) -> object:
    entries = [(t.name, p) for t in request.topics for p in t.partitions]
    allowed = {t.name: ctx.allowed(DELETE, TOPIC, t.name) for t in request.topics}
    moves = [(name, p.partition_index, p.offset) for name, p in entries
             if allowed[name] and not is_internal(name)]
    done = iter(await ctx.broker.store.delete_records_off_loop(moves))  # one table save
    outs = iter([_denied(p) if not allowed[name] else
                 _out(ctx, name, p, None if is_internal(name) else next(done))
                 for name, p in entries])
    return Response(throttle_time_ms=0, topics=[
        TopicOut(name=t.name, partitions=[next(outs) for _ in t.partitions])
        for t in request.topics])
