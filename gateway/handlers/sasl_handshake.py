"""SaslHandshake (key 17), v0-1: the mechanism a client picks. An unknown or disabled one is
answered UNSUPPORTED_SASL_MECHANISM with the listener's mechanisms, then the connection closes;
v0 means the tokens that follow come as bare frames, v1 that they come in SaslAuthenticate.
On a listener without SASL it is answered ILLEGAL_SASL_STATE, as Kafka's request handler does."""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 17
VERSIONS = (0, 1)

Response = messages.get("SaslHandshakeResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    session = ctx.session
    if session.sasl is None:
        return Response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(session.sasl.security.sasl_enabled_mechanisms)
    if not session.handshake(request.mechanism, ctx.api_version):
        session.close_after_reply = True
        return Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    return Response(error_code=ErrorCode.NONE, mechanisms=enabled)
