"""Produce (key 0): each partition's batch goes through the produce path
(``gateway/produce_path.py``: validation as Kafka's LogValidator, the idempotent producer's
epoch and sequence, the append); this module answers the request.

acks=0 gets no response; acks=1 is answered after the appends; acks=-1 after the store's
durability point (under SYNC_FLUSH, the group-commit fsync). An acks value other than 0, 1 or
-1 is INVALID_REQUIRED_ACKS for every partition. v13 names topics by id (UNKNOWN_TOPIC_ID).
With the authorizer on, a topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED) and a
transactional producer WRITE on its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition), as Kafka checks them.
"""
from __future__ import annotations

from commitgate.engine import StoreStatus
from commitgate.gateway.broker import STORE_ERRORS
from commitgate.gateway.produce_path import PartitionOut, append_partition, fail
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC, TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import WRITE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 0
VERSIONS = (3, 13)
ADVERTISED_MIN = 0  # Kafka 4 lists v0-2 but refuses them; older librdkafka needs the 0 (KAFKA-18659)

Response = messages.get("ProduceResponse").cls
TopicOut = Response.TopicProduceResponse


async def handle(ctx: RequestContext, request) -> object | None:
    broker = ctx.broker
    by_id = ctx.api_version >= 13
    acks = request.acks
    topics_out, waits = [], []
    txn = request.transactional_id
    refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED \
        if txn is not None and not ctx.allowed(WRITE, TRANSACTIONAL_ID, txn) else None
    for data in request.topic_data:
        topic = broker.topic_by_id(data.topic_id) if by_id else broker.topic(data.name)
        name = topic.name if by_id and topic is not None else data.name
        denied = refused or (ErrorCode.TOPIC_AUTHORIZATION_FAILED
                             if not ctx.allowed(WRITE, TOPIC, name or "") else None)
        partitions = []
        for part in data.partition_data:
            if acks not in (0, 1, -1) or denied:
                out = fail(PartitionOut(index=part.index, base_offset=-1, log_append_time_ms=-1,
                                        log_start_offset=-1),
                           denied or ErrorCode.INVALID_REQUIRED_ACKS)
                end = -1
            else:
                out, end = append_partition(ctx, topic, part.index, part.records)
                if by_id and topic is None:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            partitions.append(out)
            if end >= 0:
                waits.append((out, end))
        topics_out.append(TopicOut(name=data.name, topic_id=data.topic_id,
                                   partition_responses=partitions))
    if acks == -1 and waits:
        status = await broker.store.wait_durable(max(end for _, end in waits))
        if status is not StoreStatus.OK:
            for out, _ in waits:
                fail(out, STORE_ERRORS[status], f"not durable: {status.value}")
    broker.metrics.partition_errors(
        "Produce", (p.error_code for t in topics_out for p in t.partition_responses))
    if acks == 0:
        return None
    return Response(responses=topics_out, throttle_time_ms=0)
