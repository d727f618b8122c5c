"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

Without a transactional id, as Kafka's TransactionCoordinator does, every request gets a fresh
id with epoch 0 from the persistent allocator, whatever id and epoch it carries: the v3+
(KIP-360) fields only matter for transactional ids. An idempotent producer that hits a sequence
error either bumps its epoch itself (the Java client; partitions then accept the new epoch
from sequence 0 and fence the old one) or asks here again and starts over with a new id.
With a transactional id the transaction coordinator answers: the id's producer id with its
epoch bumped, which fences older producers of the id (gateway/transactions/coordinator.py).
A producer id given without an epoch, or the reverse, is INVALID_REQUEST (KafkaApis).
"""
from __future__ import annotations

import logging

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME, TOPIC, TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import IDEMPOTENT_WRITE, WRITE
from commitgate.gateway.transactions.errors import fenced
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 22
VERSIONS = (0, 5)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

Response = messages.get("InitProducerIdResponse").cls


def _error(code: ErrorCode) -> object:
    return Response(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                    producer_epoch=NO_PRODUCER_EPOCH)


async def handle(ctx: RequestContext, request) -> object:
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH) \
            or request.transactional_id == "":
        log.info("%s sent an invalid InitProducerId: transactional id %r, producer id %d, epoch "
                 "%d", ctx.who(), request.transactional_id, request.producer_id,
                 request.producer_epoch)
        return _error(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is not None:
        if not ctx.allowed(WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await _transactional(ctx, request)
    if not (ctx.allowed(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME) or
            ctx.allowed_on_any(WRITE, TOPIC)):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid = ctx.broker.producer_ids.allocate()
    log.info("producer id %d epoch 0 for %s", pid, ctx.who())
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid,
                    producer_epoch=0)


async def _transactional(ctx: RequestContext, request) -> object:
    result = await ctx.broker.transactions.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, request.producer_id,
        request.producer_epoch, fenced(ctx.api_version, since=4))
    if result.error is not ErrorCode.NONE:
        log.info("InitProducerId for transactional id %r from %s: %s",
                 request.transactional_id, ctx.who(), result.error.name)
        return _error(result.error)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                    producer_id=result.producer_id, producer_epoch=result.producer_epoch)
