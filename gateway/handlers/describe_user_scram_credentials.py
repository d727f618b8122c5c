"""DescribeUserScramCredentials (key 50), v0: each user's SCRAM mechanisms and iteration
counts (never the keys), all users for a null or empty list (gateway/security/scram_store.py)."""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import CLUSTER_DENIED, DESCRIBE
from commitgate.gateway.security.scram_store import CODES
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 50
VERSIONS = (0, 0)

Response = messages.get("DescribeUserScramCredentialsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_DENIED, results=[])
    users = [u.name for u in request.users] if request.users else None
    results = [Response.DescribeUserScramCredentialsResult(
        user=user, error_code=error, error_message=message,
        credential_infos=[Response.CredentialInfo(
            mechanism=CODES[mechanism], iterations=iterations)
            for mechanism, iterations in infos.items()])
        for user, error, message, infos in ctx.broker.scram.describe(users)]
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                    results=results)
