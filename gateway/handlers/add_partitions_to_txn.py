"""AddPartitionsToTxn (key 24): partitions join a producer's ongoing transaction.

v0-3 come from producers: one transactional id, every partition answered with the same error.
v4+ batch several transactions (Kafka's brokers send them to the coordinator); with
``verify_only`` nothing changes and each partition says whether it is in the ongoing
transaction. As KafkaApis does, partitions of unknown topics fail with
UNKNOWN_TOPIC_OR_PARTITION and the others of the request with OPERATION_NOT_ATTEMPTED;
internal topics cannot join (``__consumer_offsets`` joins through AddOffsetsToTxn).
"""
from __future__ import annotations

import logging

from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC, TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import WRITE
from commitgate.gateway.transactions.errors import fenced
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 24
VERSIONS = (0, 5)

Response = messages.get("AddPartitionsToTxnResponse").cls
TopicResult = Response.AddPartitionsToTxnTopicResult
PartitionResult = Response.AddPartitionsToTxnPartitionResult
TopicPartition = tuple[str, int]


def _partitions(topics) -> list[TopicPartition]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _unknown(ctx: RequestContext, partitions: list[TopicPartition]) -> dict[TopicPartition,
                                                                              ErrorCode]:
    bad = {}
    for name, index in partitions:
        topic = ctx.broker.topic(name)
        if topic is None or not 0 <= index < topic.partitions:
            bad[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif is_internal(name):
            bad[(name, index)] = ErrorCode.INVALID_TOPIC_EXCEPTION
    return bad


async def _one(ctx: RequestContext, txn_id: str, pid: int, epoch: int,
               partitions: list[TopicPartition], verify: bool) -> dict[TopicPartition,
                                                                    ErrorCode]:
    coordinator = ctx.broker.transactions
    fence = fenced(ctx.api_version, since=2)
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, txn_id):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in partitions}
    bad = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions
           if not ctx.allowed(WRITE, TOPIC, tp[0])} or _unknown(ctx, partitions)
    if bad:
        return {tp: bad.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    if verify:
        return coordinator.verify_partitions(txn_id, pid, epoch, partitions, fence)
    error = await coordinator.add_partitions(txn_id, pid, epoch, partitions, fence)
    if error is not ErrorCode.NONE:
        log.info("AddPartitionsToTxn of %r (producer %d epoch %d) from %s: %s", txn_id, pid,
                 epoch, ctx.who(), error.name)
    return {tp: error for tp in partitions}


def _results(errors: dict[TopicPartition, ErrorCode]) -> list:
    topics: dict[str, list] = {}
    for (name, index), error in errors.items():
        topics.setdefault(name, []).append(PartitionResult(partition_index=index,
                                                           partition_error_code=error))
    return [TopicResult(name=name, results_by_partition=parts) for name, parts in topics.items()]


async def handle(ctx: RequestContext, request) -> object:
    if ctx.api_version <= 3:
        errors = await _one(ctx, request.v3_and_below_transactional_id,
                            request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch,
                            _partitions(request.v3_and_below_topics), verify=False)
        return Response(throttle_time_ms=0, results_by_topic_v3_and_below=_results(errors))
    results = []
    for txn in request.transactions:
        errors = await _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                            _partitions(txn.topics), txn.verify_only)
        results.append(Response.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                         topic_results=_results(errors)))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                    results_by_transaction=results)
