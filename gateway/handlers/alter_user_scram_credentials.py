"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM credentials,
saved before the answer (gateway/security/scram_store.py). The client salts the password; the
broker keeps StoredKey and ServerKey only."""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import CLUSTER, CLUSTER_NAME
from commitgate.gateway.security.authorizer import ALTER
from commitgate.gateway.security.scram_store import Upsertion
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 51
VERSIONS = (0, 0)

Response = messages.get("AlterUserScramCredentialsResponse").cls


async def handle(ctx: RequestContext, request) -> object:
    deletions = [(d.name, d.mechanism) for d in request.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                            bytes(u.salted_password)) for u in request.upsertions]
    if ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        results = ctx.broker.scram.alter(deletions, upsertions)
    else:
        results = {user: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                   for user, _ in [*deletions, *((u.user, 0) for u in upsertions)]}
    return Response(throttle_time_ms=0, results=[
        Response.AlterUserScramCredentialsResult(user=user, error_code=error,
                                                 error_message=message)
        for user, (error, message) in results.items()])
