"""SaslAuthenticate (key 36), v0-2: one token of the SASL exchange (gateway/security/). A failed
authentication is answered SASL_AUTHENTICATION_FAILED with the reason, later the more often the
address failed lately, and the connection closes. v1+ tell the session's lifetime (KIP-368). On
a listener without SASL, or after authentication without a new SaslHandshake, it is answered
ILLEGAL_SASL_STATE, as Kafka's request handler does."""
from __future__ import annotations

import asyncio
import logging

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.sasl_errors import AuthenticationFailed
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 36
VERSIONS = (0, 2)

Response = messages.get("SaslAuthenticateResponse").cls
log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request) -> object:
    session = ctx.session
    if session.sasl is None or session.authenticated:
        return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                        error_message="SaslAuthenticate request received after successful "
                                      "authentication", auth_bytes=b"", session_lifetime_ms=0)
    try:
        challenge, lifetime_ms = await authenticate(ctx, bytes(request.auth_bytes))
    except AuthenticationFailed as exc:
        session.close_after_reply = True
        return Response(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                        error_message=str(exc), auth_bytes=b"", session_lifetime_ms=0)
    return Response(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                    session_lifetime_ms=lifetime_ms)


async def authenticate(ctx: RequestContext, token: bytes) -> tuple[bytes, int]:
    """One token through the session (also the bare frames after SaslHandshake v0); a
    failure is logged, counted and answered late (connection.failed.authentication.delay.ms)."""
    session = ctx.session
    assert session.sasl is not None  # the session admits no SaslAuthenticate otherwise
    try:
        result = session.authenticate(token)
    except AuthenticationFailed as exc:
        ctx.broker.network.sasl_authentication_failures += 1
        host = ctx.peer.rpartition(":")[0]
        delay = session.sasl.failures.failed(
            host, session.sasl.security.connection_failed_authentication_delay_ms)
        log.info("%s failed %s authentication on listener %s: %s", ctx.who(),
                 session.mechanism, session.listener.name, exc)
        await asyncio.sleep(delay)
        raise
    if session.authenticated:
        ctx.broker.network.sasl_authentications += 1
        log.debug("%s authenticated as %s (%s)", ctx.who(), session.principal,
                  session.mechanism)
    return result
