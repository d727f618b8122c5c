"""ListTransactions (key 66): transactional ids, filtered as Kafka filters them.

Filters: states (unknown state names are echoed in ``unknown_state_filters`` and match
nothing), producer ids, v1+ ``duration_filter`` (only transactions running longer than that
many ms; -1: no filter) and v2+ ``transactional_id_pattern`` (a regular expression matched
against the whole id).
"""
from __future__ import annotations

import re

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.gateway.transactions.coordinator import now_ms
from commitgate.gateway.transactions.txn_log import TxnState
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 66
VERSIONS = (0, 2)

Response = messages.get("ListTransactionsResponse").cls
LABELS = {state.label: state for state in TxnState}


async def handle(ctx: RequestContext, request) -> object:
    states = set(request.state_filters or ())
    unknown = sorted(states - LABELS.keys())
    pids = set(request.producer_id_filters or ())
    duration = getattr(request, "duration_filter", -1)
    pattern = getattr(request, "transactional_id_pattern", None)
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                        unknown_state_filters=[], transaction_states=[])
    now = now_ms()
    listed = []
    for meta in ctx.broker.transactions.listed():
        record = meta.record
        if (states and record.state.label not in states) or \
                (pids and record.producer_id not in pids) or \
                (duration >= 0 and (record.start_ms < 0 or now - record.start_ms <= duration)) or \
                (matcher and not matcher.fullmatch(meta.transactional_id)) or \
                not ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, meta.transactional_id):
            continue
        listed.append(Response.TransactionState(
            transactional_id=meta.transactional_id, producer_id=record.producer_id,
            transaction_state=record.state.label))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                    transaction_states=listed)
