"""EndTxn (key 26): commit or abort a producer's ongoing transaction.

Answered once the coordinator logged PrepareCommit/PrepareAbort and wrote the markers into
every partition of the transaction (Kafka answers after the prepare record and writes the
markers afterwards; waiting for them here means a read_committed consumer sees the
transaction as soon as the producer's commit returns). v5 is transaction version 2 (KIP-890:
an epoch bump per transaction), which this broker does not advertise.
"""
from __future__ import annotations

import logging

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import WRITE
from commitgate.gateway.transactions.errors import fenced
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 26
VERSIONS = (0, 4)

Response = messages.get("EndTxnResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return Response(throttle_time_ms=0,
                        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed, fenced(ctx.api_version, since=2))
    if error is not ErrorCode.NONE:
        log.info("EndTxn (%s) of %r, producer %d epoch %d, from %s: %s",
                 "commit" if request.committed else "abort", request.transactional_id,
                 request.producer_id, request.producer_epoch, ctx.who(), error.name)
    return Response(throttle_time_ms=0, error_code=error)
