"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward (the low
watermark), as Kafka's ReplicaManager.deleteRecords does on the leader.

Offset -1 means the high watermark. An offset past the high watermark, or negative other than
-1, is OFFSET_OUT_OF_RANGE; one below the current log start changes nothing and answers the
current one. Records below the new start are no longer served (fetching there is
OFFSET_OUT_OF_RANGE); their files go once no partition needs them. One broker, so the request
never waits for followers or for its timeout. Failed partitions answer low watermark -1.
"""
from __future__ import annotations

import logging

from engine import StoreStatus
from gateway.broker import STORE_ERRORS
from gateway.request_context import RequestContext
from protocol import messages

log = logging.getLogger(__name__)

API_KEY = 21
VERSIONS = (0, 2)
INVALID_LOW_WATERMARK = -1

Response = messages.get("DeleteRecordsResponse").cls
TopicOut = Response.DeleteRecordsTopicResult
PartitionOut = Response.DeleteRecordsPartitionResult


def _delete(ctx: RequestContext, topic: str, partition) -> object:
    status, low = ctx.broker.store.delete_records(topic, partition.partition_index,
                                                  partition.offset)
    if status is not StoreStatus.OK:
        low = INVALID_LOW_WATERMARK
        log.info("delete records of %s-%d before %d from %s refused: %s", topic,
                 partition.partition_index, partition.offset, ctx.who(), status.value)
    return PartitionOut(partition_index=partition.partition_index, low_watermark=low,
                        error_code=STORE_ERRORS[status])


async def handle(ctx: RequestContext, request) -> object:
    return Response(throttle_time_ms=0, topics=[
        TopicOut(name=t.name, partitions=[_delete(ctx, t.name, p) for p in t.partitions])
        for t in request.topics])
