"""``/healthz``: the process is up and its loop answers. ``/readyz``: the broker can serve
Kafka clients: the store open and writable, the Kafka listener accepting, no background task
failed for good. 503 with the reasons otherwise, and the broker's health (the store's state and
every supervised task's) in both answers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from commitgate.engine.supervision import TaskState

if TYPE_CHECKING:
    from commitgate.gateway.broker import Broker
    from commitgate.gateway.listener import Listener


def routes(broker: Broker, listener: Listener) -> list[web.RouteDef]:
    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"status": "up"})

    async def readyz(_request: web.Request) -> web.Response:
        reasons = not_ready(broker, listener)
        return web.json_response(
            {"status": "not ready" if reasons else "ready", "reasons": reasons,
             **broker.health()}, status=503 if reasons else 200)

    return [web.get("/healthz", healthz), web.get("/readyz", readyz)]


def not_ready(broker: Broker, listener: Listener) -> list[str]:
    """Why the broker cannot serve clients now; empty when it can."""
    store = broker.store
    reasons = []
    if not store.open_:
        reasons.append("the store is not open")
    if store.offline_reason:
        reasons.append(f"the store is offline until a restart: {store.offline_reason}")
    if not listener.accepting:
        reasons.append(f"the Kafka listener on {broker.config.listener} is not accepting")
    reasons += [f"background task {health.name} failed: {health.last_error}"
                for health in store.supervisor.tasks.values() if health.state is TaskState.FAILED]
    return reasons
