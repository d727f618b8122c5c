"""ApiVersions (key 18): which APIs and versions this broker serves."""
from __future__ import annotations

from commitgate.gateway.request_context import RequestContext
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 18
VERSIONS = (0, 4)

Response = messages.get("ApiVersionsResponse").cls


def _api_keys() -> list:
    from commitgate.gateway.handlers import all_handlers

    return [Response.ApiVersion(api_key=h.api_key, min_version=h.advertised_min,
                                max_version=h.max_version)
            for h in sorted(all_handlers().values(), key=lambda h: h.api_key)]


def unsupported_version() -> object:
    """The reply to an unsupported ApiVersions version: v0 layout, with our versions listed so
    the client can retry with one it shares."""
    return Response(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())


async def handle(ctx: RequestContext, request) -> object:
    return Response(error_code=ErrorCode.NONE, api_keys=_api_keys(), throttle_time_ms=0)
