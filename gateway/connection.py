"""One client connection: frames in, handlers run, responses out in request order.

Requests may be pipelined: each decoded request starts a handler task at once (so appends
happen in arrival order and SYNC_FLUSH producers share fsyncs), and responses are written as the
head of the queue completes. Record sets in responses go to the transport as separate buffers
(``writelines``), never joined in Python.
"""
from __future__ import annotations

import asyncio
import collections
import logging

from gateway.broker import Broker
from gateway.frame_reader import SIZE, FrameError, FrameReader
from gateway.handlers import Handler, all_handlers
from gateway.request_context import RequestContext
from protocol import messages
from protocol.codec import Chunks, DecodeError
from protocol.errors import ErrorCode
from protocol.header import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_request_header,
    peek_api,
    response_header,
)

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64  # requests queued on one connection before reading pauses


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, connections: set[KafkaConnection]) -> None:
        self.broker = broker
        self.handlers = all_handlers()
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._reader = FrameReader(broker.config.socket_request_max_bytes)
        self._queue: collections.deque[tuple[RequestHeader, Handler, asyncio.Future]] = \
            collections.deque()
        self._reading_paused = False
        self._writing_paused = False

    # ---- transport callbacks ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        host, port = transport.get_extra_info("peername")[:2]
        self.peer = f"{host}:{port}"
        self.connections.add(self)
        log.debug("connection from %s", self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        for _, _, task in self._queue:
            task.cancel()
        self._queue.clear()
        log.debug("connection from %s closed%s", self.peer, f": {exc}" if exc else "")

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("%s sent %s (socket.request.max.bytes); closing", self.peer, exc)
            self.close()
            return
        for frame in frames:
            if not self._on_frame(frame):
                self.close()
                return
        self._update_reading()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ---- requests -------------------------------------------------------------------------------

    def _on_frame(self, view: memoryview) -> bool:
        """Decode one request and start its handler; False closes the connection."""
        try:
            api_key, version, correlation_id = peek_api(view)
            handler = self.handlers.get(api_key)
            if handler is None:
                log.warning("%s sent %s (key %d), which CommitGate does not serve; closing",
                            self.peer, messages.api_name(api_key), api_key)
                return False
            codec = messages.request(api_key)
            flexible = version in codec.spec.flexible
            if not handler.accepts(version):
                return self._unsupported(handler, version, correlation_id)
            header = decode_request_header(view, flexible)
            request, _ = codec.decode(view, version, header.size)
        except DecodeError as exc:
            log.warning("undecodable request from %s: %s; closing", self.peer, exc)
            return False
        log.debug("%s v%d from client %r at %s", handler.name, version, header.client_id,
                  self.peer)
        ctx = RequestContext(self.broker, version, header.client_id, self.peer)
        task = asyncio.ensure_future(handler.handle(ctx, request))
        self._queue.append((header, handler, task))
        task.add_done_callback(self._drain)
        # records are views of the frame: its buffer is reused only once the handler is done
        task.add_done_callback(lambda _: self._reader.release(view))
        return True

    def _unsupported(self, handler: Handler, version: int, correlation_id: int) -> bool:
        log.warning("%s sent %s v%d; CommitGate serves v%d-v%d", self.peer, handler.name,
                    version, handler.min_version, handler.max_version)
        if handler.api_key != API_VERSIONS_KEY:
            return False  # as Kafka: an unsupported version of any other API closes the socket
        from gateway.handlers.api_versions import error_response

        header = RequestHeader(API_VERSIONS_KEY, 0, correlation_id, None, 0)
        done = asyncio.get_running_loop().create_future()
        done.set_result(error_response(ErrorCode.UNSUPPORTED_VERSION))
        self._queue.append((header, handler, done))
        self._drain()
        return True

    def _drain(self, _: asyncio.Future | None = None) -> None:
        """Write every finished response at the head of the queue, in request order."""
        queue = self._queue
        while queue and queue[0][2].done():
            header, handler, task = queue.popleft()
            if task.cancelled():
                continue
            exc = task.exception()
            if exc is not None:
                log.error("%s v%d from %s (client %r) failed; closing the connection",
                          handler.name, header.api_version, self.peer, header.client_id,
                          exc_info=exc)
                self.close()
                return
            response = task.result()
            if response is not None:
                self._write(header, response)
        self._update_reading()

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

    def _update_reading(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        busy = self._writing_paused or len(self._queue) >= MAX_IN_FLIGHT
        if busy and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not busy and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    async def finish(self, timeout_s: float) -> None:
        """Wait (boundedly) for in-flight requests, then close (shutdown)."""
        pending = [task for _, _, task in self._queue]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self.close()
