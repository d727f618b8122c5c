"""InitProducerId (key 22): producer ids for idempotent producers.

A new idempotent producer gets a fresh id (epoch 0) from the persistent allocator. A producer
that sends its current id and epoch (KIP-360, v3+) after an error gets the epoch bumped, or a
fresh id once the epoch is exhausted. Transactional ids arrive with the transactions issue.
"""
from __future__ import annotations

import logging

from gateway.request_context import RequestContext
from protocol import messages
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 22
VERSIONS = (0, 5)
MAX_EPOCH = 32767

Response = messages.get("InitProducerIdResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    if request.transactional_id is not None:
        log.info("%s asked for transactional id %r: transactions are not served yet",
                 ctx.who(), request.transactional_id)
        return Response(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        producer_id=-1, producer_epoch=-1)
    pid, epoch = request.producer_id, request.producer_epoch
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        epoch += 1
    else:
        pid, epoch = broker.producer_ids.allocate(), 0
    log.info("producer id %d epoch %d for %s", pid, epoch, ctx.who())
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid,
                    producer_epoch=epoch)
