"""InitProducerId (key 22): producer ids for idempotent producers.

As Kafka's TransactionCoordinator does without a transactional id, every request gets a fresh
id with epoch 0 from the persistent allocator, whatever id and epoch it carries: the v3+
(KIP-360) fields only matter for transactional ids. An idempotent producer that hits a sequence
error either bumps its epoch itself (the Java client; partitions then accept the new epoch
from sequence 0 and fence the old one) or asks here again and starts over with a new id.
A producer id given without an epoch, or the reverse, is INVALID_REQUEST (KafkaApis).
Transactional ids arrive with the transactions issue; until then they are refused.
"""
from __future__ import annotations

import logging

from gateway.request_context import RequestContext
from protocol import messages
from protocol.errors import ErrorCode

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
    if request.transactional_id:  # refused where Kafka checks the transactional id's ACL
        log.info("%s asked for transactional id %r: transactions are not supported yet",
                 ctx.who(), request.transactional_id)
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH) \
            or request.transactional_id == "":
        log.info("%s sent an invalid InitProducerId: transactional id %r, producer id %d, epoch "
                 "%d", ctx.who(), request.transactional_id, request.producer_id,
                 request.producer_epoch)
        return _error(ErrorCode.INVALID_REQUEST)
    pid = ctx.broker.producer_ids.allocate()
    log.info("producer id %d epoch 0 for %s", pid, ctx.who())
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid,
                    producer_epoch=0)
