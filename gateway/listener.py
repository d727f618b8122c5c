"""The listener: accepts Kafka clients within the broker's connection limits.

Its own accept loop (``sock_accept`` + ``connect_accepted_socket``, asyncio's and uvloop's) lets
it stop accepting, which a server from ``create_server`` cannot. As Kafka's ConnectionQuotas:
  * ``max.connections``: while the broker holds that many, nothing is accepted; the next client
    waits in the listen backlog until one closes;
  * ``max.connections.per.ip`` (and its overrides): a connection beyond its address's limit is
    closed at once;
  * ``connections.max.idle.ms`` (negative: never): a connection with no request in flight that
    received nothing and was answered nothing for that long is closed by a periodic sweep.
The listener also owns what connections share: the request memory (``queued.max.request.bytes``)
and the rate-limited log of what clients sent wrong. It listens on every configured listener
(``listeners``), each with its security protocol: a TLS listener's handshakes run as tasks of
their own (bounded by ``ssl.handshake.timeout``), so a client that never finishes one holds up
nobody; they count toward the per-address limit meanwhile.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time

from commitgate.gateway.broker import Broker
from commitgate.gateway.connection import KafkaConnection
from commitgate.gateway.request_memory import RequestMemory
from commitgate.gateway.security.listener_security import ListenerSecurity
from commitgate.gateway.security.session import FailedLogins, SaslSettings

log = logging.getLogger(__name__)

BACKLOG = 1024
SWEEP_MAX_S = 1.0  # the idle sweep also ends the peer log's intervals
SWEEP_MIN_S = 0.01
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class Listener:
    def __init__(self, broker: Broker, securities: list[ListenerSecurity]) -> None:
        config = broker.config
        self.broker = broker
        self.securities = securities
        failed_logins = FailedLogins()  # every SASL listener's, by address
        self._sasl = {s.spec.name: SaslSettings(s.config, broker.scram, s.oauth, failed_logins)
                      for s in securities if s.spec.protocol.sasl}
        self._handshakes: set[asyncio.Task] = set()
        self._handshaking: collections.Counter[str] = collections.Counter()
        self.stats = broker.network
        self.memory = RequestMemory(config.queued_max_request_bytes, self.stats)
        self.peer_log = broker.peer_log
        self.connections: set[KafkaConnection] = set()
        self.supervisor = broker.store.supervisor  # its tasks show in the broker's health
        self._per_host: collections.Counter[str] = collections.Counter()
        self._host_limits: dict[str, int] = {}  # overrides by address, resolved at start
        self._room = asyncio.Event()  # set while below max.connections
        self._room.set()
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        """Resolve the per-address overrides, bind and listen, start accepting and sweeping."""
        config = self.broker.config
        for host, limit in config.max_connections_per_ip_overrides.items():
            for address in await _addresses(host):
                self._host_limits[address] = limit
        bound: list[tuple[socket.socket, ListenerSecurity]] = []
        try:
            for security in self.securities:
                endpoint = security.spec.endpoint
                for sock in await _bind(endpoint.host, endpoint.port):
                    self._sockets.append(sock)
                    bound.append((sock, security))
            for sock, _ in bound:  # all at once: a client that reaches one reaches them all
                sock.listen(BACKLOG)
        except OSError:
            self.close()
            raise
        for sock, security in bound:
            self._tasks.append(self.supervisor.spawn(
                f"listener-accept-{security.spec.name}-{len(self._tasks)}",
                lambda sock=sock, security=security: self._accept(sock, security)))
        self._tasks.append(self.supervisor.spawn("listener-sweeper", self._sweep))


    @property
    def accepting(self) -> bool:
        """Listening, its accept loops running (max.connections may hold a client meanwhile)."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    def close(self) -> None:
        """Stop accepting (open connections stay until ``finish``)."""
        for task in [*self._tasks, *self._handshakes]:
            task.cancel()
        for sock in self._sockets:
            sock.close()
        self._tasks, self._sockets = [], []

    async def finish(self, timeout_s: float) -> None:
        await asyncio.gather(*(c.finish(timeout_s) for c in list(self.connections)))

    # ---- connections --------------------------------------------------------------------------

    def opened(self, connection: KafkaConnection) -> None:
        self.connections.add(connection)
        self._per_host[connection.host] += 1
        self.stats.connections_open = len(self.connections)
        self.stats.connections_accepted += 1
        if len(self.connections) >= self.broker.config.max_connections:
            self._room.clear()

    def closed(self, connection: KafkaConnection) -> None:
        if connection not in self.connections:
            return
        self.connections.remove(connection)
        self._per_host[connection.host] -= 1
        if not self._per_host[connection.host]:
            del self._per_host[connection.host]
        self.stats.connections_open = len(self.connections)
        if len(self.connections) < self.broker.config.max_connections:
            self._room.set()

    def _host_limit(self, host: str) -> int:
        return self._host_limits.get(host, self.broker.config.max_connections_per_ip)

    async def _accept(self, sock: socket.socket, security: ListenerSecurity) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._room.is_set():
                self.stats.accept_paused += 1
                log.log(logging.INFO if self.stats.accept_paused == 1 else logging.DEBUG,
                        "max.connections (%d) reached: accepting again once one closes",
                        self.broker.config.max_connections)
                await self._room.wait()
            try:
                client, address = await loop.sock_accept(sock)
            except OSError as exc:  # out of file descriptors or memory: as asyncio's server
                log.error("accepting a connection failed: %s; retrying in a second", exc)
                await asyncio.sleep(1.0)
                continue
            host = address[0]
            held = self._per_host[host] + self._handshaking[host]
            if held >= self._host_limit(host):
                self.stats.connections_refused_per_ip += 1
                self.peer_log.warning(host, "%s has %d connections (max.connections.per.ip); "
                                      "closed the next one", host, held)
                client.close()
                continue
            if security.tls is None:
                await self._connect(client, security, host)
                continue
            self._handshaking[host] += 1
            task = asyncio.ensure_future(self._connect(client, security, host))
            self._handshakes.add(task)
            task.add_done_callback(lambda done, host=host: self._handshake_done(done, host))

    def _handshake_done(self, task: asyncio.Task, host: str) -> None:
        self._handshakes.discard(task)
        self._handshaking[host] -= 1
        if not self._handshaking[host]:
            del self._handshaking[host]

    async def _connect(self, client: socket.socket, security: ListenerSecurity,
                       host: str) -> None:
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as create_server
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: KafkaConnection(self.broker, self, security.spec, security.config,
                                        self._sasl.get(security.spec.name)),
                client, ssl=security.tls,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if security.tls else None)
        except (TimeoutError, OSError) as exc:  # the client left, or its TLS failed
            if security.tls is not None:
                self.stats.tls_handshakes_failed += 1
                self.peer_log.warning(host, "TLS handshake on listener %s with %s failed: %s",
                                      security.spec.name, host, exc)
            else:
                log.debug("a connection closed before it was set up: %s", exc)
            client.close()

    async def _sweep(self) -> None:
        idle_ms = self.broker.config.connections_max_idle_ms
        idle_s = idle_ms / 1000 if idle_ms >= 0 else float("inf")
        while True:
            await asyncio.sleep(min(SWEEP_MAX_S, max(idle_s / 4, SWEEP_MIN_S)))
            self.peer_log.flush()
            now = time.monotonic()
            for connection in list(self.connections):
                if connection.idle(now) > idle_s:
                    self.stats.connections_closed_idle += 1
                    log.debug("closing %s: idle for more than connections.max.idle.ms (%d)",
                              connection.peer, idle_ms)
                    connection.close()


async def _addresses(host: str) -> set[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return {info[4][0] for info in infos}


async def _bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` (all interfaces when it is empty), as
    ``create_server`` makes them, not yet listening."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
