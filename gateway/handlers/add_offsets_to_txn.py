"""AddOffsetsToTxn (key 25): a group's offsets join a producer's ongoing transaction.

The group's ``__consumer_offsets`` partition becomes a partition of the transaction, as in
Kafka, so that TxnOffsetCommit may then write the group's offsets into it and EndTxn commits
or aborts them with the rest of the transaction.
"""
from __future__ import annotations

import logging

from commitgate.engine import StoreStatus
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP, TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import READ, WRITE
from commitgate.gateway.transactions.errors import fenced
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 25
VERSIONS = (0, 4)

Response = messages.get("AddOffsetsToTxnResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    groups = ctx.broker.groups
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return Response(throttle_time_ms=0,
                        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.allowed(READ, GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    if groups.topic.ensure() is not StoreStatus.OK:
        return Response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    partition = (OFFSETS_TOPIC, groups.topic.partition_for(request.group_id))
    error = await ctx.broker.transactions.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition],
        fenced(ctx.api_version, since=2))
    if error is not ErrorCode.NONE:
        log.info("AddOffsetsToTxn of %r for group %r from %s: %s", request.transactional_id,
                 request.group_id, ctx.who(), error.name)
    return Response(throttle_time_ms=0, error_code=error)
