"""The admin HTTP listener (``admin.listeners``): an aiohttp application on the broker's own loop,
started and stopped by ``gateway.server`` beside the Kafka listener.

Routes: ``/metrics`` (Prometheus text format, or OpenMetrics when the scraper asks; ``name[]``
selects families, as prometheus-client's own exposition does), ``/healthz`` and ``/readyz`` (``health.py``), ``/v1/query``
(``query.py``), ``/v1/topics`` and ``/v1/groups`` (``topics.py``). Every error is JSON,
``{"error": "..."}``, with its status: bad parameters 400, unknown paths 404, wrong methods
405; an unexpected exception in a handler is logged with its traceback, recorded in the
broker's health (``admin-http``) and answered 500. With ``admin.listeners=https://...`` it serves
TLS with the ssl.keystore.* key; with ``admin.authentication`` every route but the health
probes asks for HTTP basic credentials of a SCRAM user or a bearer JWT (401 otherwise).
"""
from __future__ import annotations

import base64
import binascii
import logging
import ssl
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from commitgate.engine.supervision import TaskState
from commitgate.gateway.admin import health, metrics, query, topics
from commitgate.gateway.security.oauth_tokens import TokenValidator
from commitgate.gateway.security.sasl_errors import AuthenticationFailed

if TYPE_CHECKING:
    from commitgate.gateway.broker import Broker
    from commitgate.gateway.endpoint import Endpoint
    from commitgate.gateway.listener import Listener

log = logging.getLogger(__name__)

METRICS_PARAMETERS = {"name[]"}
OPEN_PATHS = frozenset({"/healthz", "/readyz"})  # probes never authenticate
SHUTDOWN_TIMEOUT_S = 5.0  # for requests in flight when the broker stops


def url(endpoint: Endpoint, https: bool = False) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{'https' if https else 'http'}://{host}:{endpoint.port}"


class AdminServer:
    def __init__(self, broker: Broker, listener: Listener, endpoint: Endpoint,
                 tls: ssl.SSLContext | None = None, tokens: TokenValidator | None = None
                 ) -> None:
        self.broker = broker
        self.listener = listener
        self.endpoint = endpoint
        self.tls = tls
        self.tokens = tokens  # admin.authentication=bearer
        self.authentication = broker.config.admin_authentication
        self.registry = metrics.registry(broker)
        self._health = broker.store.supervisor.entry("admin-http")
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve; OSError naming admin.listeners when the address cannot be bound."""
        app = web.Application(middlewares=[self._json_errors, self._authenticated])
        app.add_routes([web.get("/metrics", self._metrics),
                        *health.routes(self.broker, self.listener),
                        *query.routes(self.broker), *topics.routes(self.broker)])
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        site = web.TCPSite(runner, self.endpoint.host, self.endpoint.port, reuse_address=True,
                           ssl_context=self.tls)
        try:
            await site.start()
        except OSError as exc:  # port taken, address not local: the start fails, clearly
            await runner.cleanup()
            raise OSError(exc.errno, f"admin.listeners={url(self.endpoint, self.tls is not None)} "
                                     f"cannot listen: {exc.strerror or exc}") from None
        self._runner = runner
        self._health.state = TaskState.RUNNING
        log.info("admin HTTP API on %s (/metrics, /healthz, /readyz, /v1/...), authentication: "
                 "%s", url(self.endpoint, self.tls is not None), self.authentication)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._health.state = TaskState.STOPPED

    async def _metrics(self, request: web.Request) -> web.Response:
        unknown = set(request.query) - METRICS_PARAMETERS
        if unknown:
            raise web.HTTPBadRequest(text=f"unknown parameters: {', '.join(sorted(unknown))} "
                                          f"(/metrics takes name[])")
        names = request.query.getall("name[]", [])
        chosen = self.registry.restricted_registry(names) if names else self.registry
        # the text format 0.0.4, or what the scraper's Accept asks for (OpenMetrics)
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(chosen), headers={"Content-Type": content_type})

    @web.middleware
    async def _authenticated(self, request: web.Request, handler) -> web.StreamResponse:
        if self.authentication == "none" or request.path in OPEN_PATHS:
            return await handler(request)
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        who = self._who(scheme.lower(), credentials.strip())
        if who is None:
            challenge = 'Basic realm="commitgate"' if self.authentication == "basic" \
                else 'Bearer realm="commitgate"'
            raise web.HTTPUnauthorized(
                text=f"{request.method} {request.path} needs {self.authentication} "
                     f"authentication (admin.authentication)",
                headers={"WWW-Authenticate": challenge})
        return await handler(request)

    def _who(self, scheme: str, credentials: str) -> str | None:
        """The user the credentials prove, or None."""
        if self.authentication == "basic" and scheme == "basic":
            try:
                user, sep, password = base64.b64decode(credentials, validate=True).decode() \
                    .partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            return user if sep and self.broker.scram.check_password(user, password) else None
        if self.authentication == "bearer" and scheme == "bearer" and self.tokens is not None:
            try:
                return self.tokens.validate(credentials)[0]
            except AuthenticationFailed:
                return None
        return None

    @web.middleware
    async def _json_errors(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400 or exc.content_type == "application/json":
                raise
            headers = {k: v for k, v in exc.headers.items()
                       if k.lower() in ("allow", "www-authenticate")}
            return web.json_response({"error": _message(request, exc)}, status=exc.status,
                                     headers=headers)
        except Exception as exc:  # a bug: logged, recorded in the health, answered 500
            log.exception("admin HTTP %s %s failed", request.method, request.path_qs)
            self._health.failed(exc)
            return web.json_response({"error": f"internal error answering {request.method} "
                                               f"{request.path} (see the broker's log)"},
                                     status=500)


def _message(request: web.Request, exc: web.HTTPException) -> str:
    """The error's own text, or for aiohttp's stock ones ("404: Not Found") what was asked."""
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
    if exc.text == f"{exc.status}: {exc.reason}":
        return f"{exc.reason}: {request.method} {request.path}"
    return exc.text or exc.reason
