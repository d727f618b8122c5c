"""One client connection: frames in, handlers run, responses out in request order.

Requests may be pipelined: each decoded request starts a handler task at once (so appends
happen in arrival order and SYNC_FLUSH producers share fsyncs), and responses are written as the
head of the queue completes. Record sets in responses go to the transport as separate buffers
(``writelines``), never joined in Python. A request's frame (and its charge to the broker's
request memory) is given back once its response is written: handlers keep views of it until then.
Each connection has a security session (gateway/security/session.py): on a SASL listener it
admits only the authentication exchange until that completes, and a refused one closes the
connection once its answer is written.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import struct
import time
from typing import Protocol

from commitgate.gateway.broker import Broker
from commitgate.gateway.frame_reader import SIZE, FrameError, FrameReader
from commitgate.gateway.handlers import Handler, all_handlers
from commitgate.gateway.handlers.sasl_authenticate import authenticate
from commitgate.gateway.peer_log import PeerLog
from commitgate.gateway.quotas.manager import enforced
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.request_memory import RequestMemory
from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.listeners import ListenerSpec
from commitgate.gateway.security.sasl_errors import AuthenticationFailed
from commitgate.gateway.security.session import SASL_AUTHENTICATE, ClientSession, SaslSettings
from commitgate.gateway.security.tls import certificate_principal
from commitgate.protocol import messages
from commitgate.protocol.codec import Chunks, DecodeError
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.header import (
    RequestHeader,
    decode_request_header,
    peek_api,
    response_header,
)

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64  # requests queued on one connection before reading pauses
SHORT_PAIR = struct.Struct(">hh")  # api key and version, the start of every request

# a request started: its header, handler, the task making its response, its frame, and when
# its last bytes were read (time.monotonic; the request metrics' latency starts there); a bare
# SASL token has no header
InFlight = tuple[RequestHeader | None, Handler, asyncio.Future, memoryview, float]


class ConnectionOwner(Protocol):
    """What a connection uses of the listener that accepted it (``gateway/listener.py``,
    which makes connections and so sits above this module)."""

    memory: RequestMemory  # queued.max.request.bytes, shared by all connections
    peer_log: PeerLog  # what clients sent wrong, rate-limited per address

    def opened(self, connection: KafkaConnection) -> None: ...

    def closed(self, connection: KafkaConnection) -> None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, owner: ConnectionOwner, listener: ListenerSpec,
                 security: SecurityConfig, sasl: SaslSettings | None = None) -> None:
        self.broker = broker
        self.security = security  # the listener's: its principal mapping rules
        self.session = ClientSession(listener, sasl)
        self.handlers = all_handlers()  # one shared dict
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.host = "?"
        self.peer = "?"
        self.last_active = time.monotonic()  # last bytes received or response written
        self._reader = FrameReader(broker.config.socket_request_max_bytes, owner.memory)
        self._queue: collections.deque[InFlight] = collections.deque()
        self._reading_paused = False
        self._writing_paused = False
        self._unmute: asyncio.TimerHandle | None = None  # while throttled by a client quota

    # ---- transport callbacks ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.host, port = transport.get_extra_info("peername")[:2]
        self.peer = f"{self.host}:{port}"
        self.owner.opened(self)
        log.debug("connection from %s on listener %s", self.peer, self.session.listener.name)
        tls = transport.get_extra_info("ssl_object")
        if tls is not None and self.session.sasl is None:  # SSL: the certificate says who
            try:
                self.session.principal = certificate_principal(
                    tls.getpeercert(binary_form=True), self.security)
            except PermissionError as exc:
                self.owner.peer_log.warning(self.host, "%s: %s; closing", self.peer, exc)
                self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.closed(self)
        if self._reader.waiting:
            self.owner.memory.cancel(self._memory_granted)
        self._reader.close()
        for _, _, task, frame, _ in self._queue:
            task.cancel()  # the frame is given back once the handler has really stopped
            task.add_done_callback(lambda _, frame=frame: self._reader.release(frame))
        self._queue.clear()
        if self._unmute is not None:
            self._unmute.cancel()
        log.debug("connection from %s closed%s", self.peer, f": {exc}" if exc else "")

    def idle(self, now: float) -> float:
        """Seconds since bytes last came or a response went; 0 while a request runs or
        waits for memory."""
        if self._queue or self._reader.waiting:
            return 0.0
        return now - self.last_active

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as exc:
            self._oversized(exc)
            return
        self._on_frames(frames)

    def _oversized(self, exc: FrameError) -> None:
        self.broker.network.oversized_frames += 1
        self.owner.peer_log.warning(self.host, "%s sent %s (socket.request.max.bytes); "
                                    "closing", self.peer, exc)
        self.close()

    def _on_frames(self, frames: list[memoryview]) -> None:
        for i, frame in enumerate(frames):
            if not self._on_frame(frame):
                for unused in frames[i:]:
                    self._reader.release(unused)
                self.close()
                return
        if self._reader.waiting:
            self.owner.memory.wait(self._memory_granted)
        self._update_reading()

    def _memory_granted(self) -> None:
        """queued.max.request.bytes has room again for the frame this connection waits on."""
        if self.transport is None or self.transport.is_closing():
            return
        try:
            frames = self._reader.granted()
        except FrameError as exc:  # a later size prefix among the bytes held meanwhile
            self._oversized(exc)
            return
        self._on_frames(frames)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ---- requests -------------------------------------------------------------------------------

    def _on_frame(self, view: memoryview) -> bool:
        """Decode one request and start its handler; False closes the connection."""
        if self.session.raw_tokens:
            return self._on_raw_token(view)
        try:
            api_key, version, correlation_id = peek_api(view)
            refusal = self.session.refusal(api_key, self.last_active)  # the frame's arrival
            if refusal is not None:
                self.owner.peer_log.warning(self.host, "%s (listener %s): %s; closing",
                                            self.peer, self.session.listener.name, refusal)
                return False
            handler = self.handlers.get(api_key)
            if handler is None:
                self.broker.network.unsupported_requests += 1
                self.owner.peer_log.warning(
                    self.host, "%s sent %s (key %d), which CommitGate does not serve; closing",
                    self.peer, messages.api_name(api_key), api_key)
                return False
            codec = messages.request(api_key)
            flexible = version in codec.spec.flexible
            if not handler.accepts(version):
                return self._unsupported(handler, version, correlation_id, view)
            header = decode_request_header(view, flexible)
            request, _ = codec.decode(view, version, header.size)
        except DecodeError as exc:
            self._undecodable(view, exc)
            return False
        log.debug("%s v%d from client %r at %s", handler.name, version, header.client_id,
                  self.peer)
        quota = self.broker.quotas.resolve(header.client_id, self.session.user)
        ctx = RequestContext(self.broker, version, header.client_id, self.peer, self.session,
                             quota)
        work = handler.handle(ctx, request)
        if quota is not None:
            work = enforced(work, quota, api_key, len(view), self.throttle)
        task = asyncio.ensure_future(work)
        self._queue.append((header, handler, task, view, self.last_active))
        task.add_done_callback(self._drain)
        return True

    def _on_raw_token(self, view: memoryview) -> bool:
        """A bare SASL token (after SaslHandshake v0): answered with a bare challenge; a failed
        authentication closes the connection (this framing has no way to say why)."""
        ctx = RequestContext(self.broker, 0, None, self.peer, self.session)
        task = asyncio.ensure_future(authenticate(ctx, bytes(view)))
        self._queue.append((None, self.handlers[SASL_AUTHENTICATE], task, view,
                            self.last_active))
        task.add_done_callback(self._drain)
        return True

    def _undecodable(self, view: memoryview, exc: DecodeError) -> None:
        """Warn in words that name the request but not the decoder's own (the details, such as
        a struct message, go to DEBUG)."""
        self.broker.network.malformed_requests += 1
        what = f"a request of {len(view)} bytes"
        if len(view) >= 4:
            api_key, version = SHORT_PAIR.unpack_from(view)
            what = f"a malformed {messages.api_name(api_key)} v{version} ({len(view)} bytes)"
        self.owner.peer_log.warning(self.host, "%s sent %s; closing", self.peer, what)
        log.debug("undecodable request from %s: %s", self.peer, exc)

    def _unsupported(self, handler: Handler, version: int, correlation_id: int,
                     view: memoryview) -> bool:
        self.broker.network.unsupported_requests += 1
        self.owner.peer_log.warning(self.host, "%s sent %s v%d; CommitGate serves v%d-v%d",
                                    self.peer, handler.name, version, handler.min_version,
                                    handler.max_version)
        if handler.unsupported_version is None:
            return False  # as Kafka: an unsupported version of any API but ApiVersions closes
        header = RequestHeader(handler.api_key, 0, correlation_id, None, 0)  # v0 answers
        done = asyncio.get_running_loop().create_future()
        done.set_result(handler.unsupported_version())
        self._queue.append((header, handler, done, view, self.last_active))
        self._drain()
        return True

    def _drain(self, _: asyncio.Future | None = None) -> None:
        """Write every finished response at the head of the queue, in request order."""
        queue = self._queue
        while queue and queue[0][2].done():
            header, handler, task, frame, received = queue.popleft()
            try:
                if not task.cancelled() and not self._respond(header, handler, task, received):
                    self.close()
                    return
            finally:
                self._reader.release(frame)
        self._update_reading()

    def _respond(self, header: RequestHeader, handler: Handler, task: asyncio.Future,
                 received: float) -> bool:
        """Write the response of a finished request and count it; False (logged) when the
        handler or the response's encoding failed."""
        if header is None:
            return self._respond_raw(task)
        try:
            response = task.result()
            if response is not None:
                self._write(header, response)
            self.broker.metrics.answered(handler.name, received,
                                         getattr(response, "error_code", ErrorCode.NONE))
            return not self.session.close_after_reply
        except DecodeError as exc:  # a check Kafka makes when it parses the request: it closes
            self.broker.network.malformed_requests += 1
            self.owner.peer_log.warning(self.host, "%s sent %s v%d: %s; closing", self.peer,
                                        handler.name, header.api_version, exc)
            return False
        except Exception as exc:  # a bug, logged with its traceback; the connection closes
            log.error("%s v%d from %s (client %r) failed; closing the connection",
                      handler.name, header.api_version, self.peer, header.client_id,
                      exc_info=exc)
            self.broker.metrics.answered(handler.name, received, ErrorCode.UNKNOWN_SERVER_ERROR)
            return False

    def _respond_raw(self, task: asyncio.Future) -> bool:
        if task.exception() is not None:
            if not isinstance(task.exception(), AuthenticationFailed):
                log.error("SASL authentication of %s failed", self.peer,
                          exc_info=task.exception())
            return False
        challenge, _ = task.result()
        if self.session.authenticated:
            self.session.raw_tokens = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines([SIZE.pack(len(challenge)), challenge])
            self.last_active = time.monotonic()
        return True

    def _write(self, header: RequestHeader, response: object) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        codec = messages.response(header.api_key)
        flexible = header.api_version in codec.spec.flexible
        head = bytearray(4)
        head += response_header(header.correlation_id, flexible, header.api_key)
        chunks = Chunks()
        tail = codec.encode_into(response, header.api_version, chunks, head)
        parts = chunks.parts  # starts with head whenever record sets were moved in
        parts.append(tail)
        SIZE.pack_into(parts[0], 0, sum(map(len, parts)) - 4)
        self.transport.writelines(parts)
        self.last_active = time.monotonic()

    def _update_reading(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        busy = (self._writing_paused or len(self._queue) >= MAX_IN_FLIGHT
                or self._reader.waiting > 0 or self._unmute is not None)
        if busy and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not busy and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    def throttle(self, ms: int) -> None:
        """Read nothing from this client for ``ms`` (a client quota's throttle time; a longer
        throttle already running is kept)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if self._unmute is not None:
            if self._unmute.when() >= until:
                return
            self._unmute.cancel()
        self._unmute = loop.call_at(until, self._throttle_ended)
        self._update_reading()

    def _throttle_ended(self) -> None:
        self._unmute = None
        self._update_reading()

    async def finish(self, timeout_s: float) -> None:
        """Wait (boundedly) for in-flight requests, then close (shutdown)."""
        pending = [task for _, _, task, _, _ in self._queue]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self.close()
