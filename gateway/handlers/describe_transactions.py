"""DescribeTransactions (key 65): the coordinator's state of transactional ids.

An id the coordinator does not know gets TRANSACTIONAL_ID_NOT_FOUND, as in Kafka.
"""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 65
VERSIONS = (0, 0)

Response = messages.get("DescribeTransactionsResponse").cls


def _state(ctx: RequestContext, txn_id: str) -> object:
    meta = ctx.broker.transactions.describe(txn_id)
    denied = not ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, txn_id)
    if meta is None or denied:
        return Response.TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
                                         if not denied else
                                         ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                         transactional_id=txn_id, transaction_state="",
                                         transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                         producer_id=-1, producer_epoch=-1, topics=[])
    record = meta.record
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(record.partitions):
        topics.setdefault(topic, []).append(partition)
    return Response.TransactionState(
        error_code=ErrorCode.NONE, transactional_id=txn_id, transaction_state=record.state.label,
        transaction_timeout_ms=record.timeout_ms, transaction_start_time_ms=record.start_ms,
        producer_id=record.producer_id, producer_epoch=record.producer_epoch,
        topics=[Response.TopicData(topic=t, partitions=p) for t, p in topics.items()])


async def handle(ctx: RequestContext, request) -> object:
    return Response(throttle_time_ms=0,
                    transaction_states=[_state(ctx, t) for t in request.transactional_ids])
