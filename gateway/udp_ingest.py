"""The UDP listener (``udp.listeners``): datagrams read with asyncio-dgram on the broker's loop,
one record each, batched per partition and appended through the produce path's
``append_partition`` (``gateway/produce_path.py``), as a Produce request's batches are.

A partition's records wait in a list until its batch reaches ``udp.batch.bytes`` (bounded by
the topic's max.message.bytes) or ``udp.linger.ms`` has passed; then they become one
RecordBatch v2 (no producer id, CreateTime = when the datagram was read) validated and
appended exactly as a Produce batch with acks=1 would be. A keyed record goes to murmur2's
partition, keyless ones round-robin. Nothing is sent back: UDP has no acknowledgements.
"""
from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import os
import socket
import time
from dataclasses import dataclass, field

import asyncio_dgram

from commitgate.gateway.broker import Broker
from commitgate.gateway.produce_path import append_partition
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.listeners import ListenerSpec, SecurityProtocol
from commitgate.gateway.security.session import ClientSession
from commitgate.gateway.udp_framing import FORMATS, Malformed, key_partition
from commitgate.gateway.udp_stats import MALFORMED, OVERSIZE, REFUSED, UNKNOWN_TOPIC
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import HEADER_SIZE, build_batch

log = logging.getLogger(__name__)

CLIENT_ID = "udp-ingest"
RECORD_OVERHEAD = 24  # a record's framing at most: length, attributes, deltas, key/value sizes
DRAIN_TIMEOUT_S = 5.0  # how long a stop reads what the socket held before closing it
DRAIN_RESEND_S = 0.1  # the end marker is sent again if it did not come back by then


@dataclass
class _Pending:
    """A partition's records not yet appended, as build_batch takes them."""
    records: list[tuple[bytes | None, bytes | None, tuple, int]] = field(default_factory=list)
    size: int = HEADER_SIZE  # the batch's size, estimated from above


class UdpIngest:
    def __init__(self, broker: Broker) -> None:
        config = broker.config
        assert config.udp_listener is not None
        self.broker = broker
        self.stats = broker.udp
        self.endpoint = config.udp_listener
        self.parse = FORMATS[config.udp_format]
        self.default_topic = config.udp_topic or None
        self.linger_s = config.udp_linger_ms / 1000
        self.max_datagram = config.udp_max_datagram_bytes
        # datagrams come from nobody authenticated: the ANONYMOUS principal of a plaintext
        # listener named UDP
        udp = ListenerSpec("UDP", SecurityProtocol.PLAINTEXT, self.endpoint)
        self.ctx = RequestContext(broker, api_version=13, client_id=CLIENT_ID,
                                  peer=f"udp://{self.endpoint}", session=ClientSession(udp, None))
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._round_robin: dict[str, itertools.count] = {}
        self._due = asyncio.Event()  # something is pending: the linger timer runs
        self._marker: bytes | None = None  # a stop's datagram to itself: the end of reading
        self._stream: asyncio_dgram.DatagramServer | None = None
        self._tasks: list[asyncio.Task] = []

    @property
    def address(self) -> tuple[str, int]:
        """Where the socket is bound (the port the OS chose for port 0)."""
        assert self._stream is not None
        return self._stream.sockname[:2]

    async def start(self) -> None:
        self._stream = await asyncio_dgram.from_socket(self._bind())
        supervisor = self.broker.store.supervisor
        self._tasks = [supervisor.spawn("udp-receive", self._receive),
                       supervisor.spawn("udp-linger", self._linger)]
        buffer = self._stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        log.info("UDP ingest on udp://%s:%d (format %s, receive buffer %d bytes)",
                 *self.address, self.broker.config.udp_format, buffer)

    def _bind(self) -> socket.socket:
        host, port = self.endpoint.host, self.endpoint.port
        family = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0][0]
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            size = self.broker.config.udp_receive_buffer_bytes
            if size > 0:  # the kernel caps it at net.core.rmem_max
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
            sock.bind((host, port))
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    async def stop(self) -> None:
        """Stop reading and append every record read so far (SIGTERM's clean stop)."""
        if self._stream is None:  # never started
            return
        receive = self._tasks[0]
        if not receive.done():
            await self._drain(receive)
        self._stream.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.flush()
        log.info("UDP ingest stopped: %s", self.stats.summary())

    async def _drain(self, receive: asyncio.Task) -> None:
        """Read everything the socket received before now: asyncio-dgram's close drops what
        its queue holds, so the receive loop reads on until a datagram of our own comes back
        (behind all those already queued in the kernel and in asyncio-dgram)."""
        self._marker = os.urandom(16)
        host, port = self.address
        if ipaddress.ip_address(host).is_unspecified:  # bound to all addresses
            host = "::1" if ":" in host else "127.0.0.1"
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        with socket.socket(self._stream.socket.family, socket.SOCK_DGRAM) as sock:
            while not receive.done() and time.monotonic() < deadline:
                sock.sendto(self._marker, (host, port))  # again if a full buffer dropped it
                await asyncio.wait({receive}, timeout=DRAIN_RESEND_S)
        if not receive.done():
            log.warning("UDP ingest: stopped reading after %g s without reaching the end of "
                        "what the socket had received", DRAIN_TIMEOUT_S)

    # ---- receiving -------------------------------------------------------------------------------

    async def _receive(self) -> None:
        assert self._stream is not None
        recv = self._stream.recv
        while True:
            try:
                data, _ = await recv()  # returns without yielding while more are queued
            except OSError as exc:  # an ICMP error reported on the socket, not a datagram
                log.debug("UDP socket error: %s", exc)
                continue
            if data == self._marker:  # stop() reached the end of what was sent before it
                return
            self.stats.received += 1
            if not self._take(data):
                await self._take_new_topic(data)

    def _take(self, data: bytes) -> bool:
        """File one datagram's record (or drop it); False when its topic must be created."""
        if len(data) > self.max_datagram:
            return self._drop(OVERSIZE, "datagram of %d bytes is larger than "
                              "udp.max.datagram.bytes=%d", len(data), self.max_datagram)
        try:
            name, key, value = self.parse(data)
        except Malformed as exc:
            return self._drop(MALFORMED, "malformed datagram of %d bytes dropped: %s",
                              len(data), exc)
        name = name or self.default_topic
        if name is None:
            return self._drop(MALFORMED, "datagram names no topic and udp.topic is not set")
        topic = self.broker.topic(name)
        if topic is None:
            return False
        partition = key_partition(key, topic.partitions) if key is not None else \
            next(self._counter(name)) % topic.partitions
        self._add(topic, partition, key, value)
        return True

    async def _take_new_topic(self, data: bytes) -> None:
        name = self.parse(data)[0] or self.default_topic
        error = await self.broker.auto_create(name)
        if error is ErrorCode.NONE and self._take(data):
            return
        why = {ErrorCode.NONE: "it was deleted as it was created",
               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "auto.create.topics.enable is false"}
        self._drop(UNKNOWN_TOPIC, "datagram for unknown topic %r dropped: %s", name,
                   why.get(error, error.name))

    def _counter(self, name: str) -> itertools.count:
        counter = self._round_robin.get(name)
        if counter is None:
            counter = self._round_robin[name] = itertools.count()
        return counter

    def _drop(self, reason: str, msg: str, *args: object) -> bool:
        """Count and log (rate-limited) a dropped datagram; True: it is dealt with."""
        self.stats.dropped[reason] += 1
        self.broker.peer_log.log_at(logging.WARNING, self.ctx.peer, "UDP ingest: " + msg, *args)
        return True

    # ---- batching --------------------------------------------------------------------------------

    def _add(self, topic, partition: int, key: bytes | None, value: bytes | None) -> None:
        size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        limit = min(self.broker.config.udp_batch_bytes, self.broker.max_message_bytes(topic))
        if HEADER_SIZE + size > limit:
            self._drop(OVERSIZE, "record of %d bytes for %s does not fit in a batch of %d bytes",
                       size, topic.name, limit)
            return
        where = (topic.name, partition)
        pending = self._pending.get(where)
        if pending is None:
            pending = self._pending[where] = _Pending()
            self._due.set()
        elif pending.size + size > limit:
            self._append(where, pending)
            pending = self._pending[where] = _Pending()
        pending.records.append((key, value, (), int(time.time() * 1000)))
        pending.size += size

    async def _linger(self) -> None:
        while True:
            await self._due.wait()
            await asyncio.sleep(self.linger_s)
            self.flush()

    def flush(self) -> None:
        """Append every partition's pending records."""
        self._due.clear()
        pending, self._pending = self._pending, {}
        for where, batch in pending.items():
            self._append(where, batch)

    def _append(self, where: tuple[str, int], pending: _Pending) -> None:
        name, partition = where
        body = memoryview(bytearray(build_batch(pending.records)))  # the store writes into it
        out, _ = append_partition(self.ctx, self.broker.topic(name), partition, body)
        count = len(pending.records)
        if out.error_code == ErrorCode.NONE:
            self.stats.appended += count
            return
        self.stats.dropped[REFUSED] += count
        self.broker.peer_log.log_at(
            logging.WARNING, self.ctx.peer, "UDP ingest: %d records for %s-%d dropped: %s %s",
            count, name, partition, ErrorCode(out.error_code).name, out.error_message or "")
