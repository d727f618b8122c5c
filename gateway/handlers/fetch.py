"""Fetch (key 1): batches from the store as zero-copy slices, long-polled on min_bytes.

A fetch that finds fewer than ``min_bytes`` parks on its partitions until an append to one of
them wakes it or ``max_wait_ms`` passes. Fetch sessions (KIP-227) are not kept: every answer
carries session id 0, which tells the client to send full fetches. With the authorizer on, a
topic the client may not READ is answered TOPIC_AUTHORIZATION_FAILED and not read.
"""
from __future__ import annotations

import time

from commitgate.engine import StoreStatus
from commitgate.engine.topic_table import TopicRecord
from commitgate.gateway.broker import STORE_ERRORS, Broker
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import READ
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 1
VERSIONS = (4, 17)
READ_COMMITTED = 1
NO_SESSION_EPOCHS = (0, -1)  # 0: full fetch asking for a session; -1: sessionless full fetch

Response = messages.get("FetchResponse").cls
TopicOut = Response.FetchableTopicResponse
PartitionOut = Response.PartitionData


class _Plan:
    """The partitions of one fetch, resolved once, read again after each wake-up."""

    def __init__(self, ctx: RequestContext, request) -> None:
        broker: Broker = ctx.broker
        by_id = ctx.api_version >= 13
        self.broker = broker
        self.request = request
        self.read_committed = request.isolation_level == READ_COMMITTED
        # a consumer with a byte-rate quota reads at most its windows' worth (Kafka's bound)
        self.max_bytes = request.max_bytes if ctx.quota is None else \
            ctx.quota.fetch_max_bytes(request.max_bytes)
        self.topics = []  # (topic out, [(partition request, topic name or None)])
        for wanted in request.topics:
            record = broker.topic_by_id(wanted.topic_id) if by_id else broker.topic(wanted.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            name = record.name if record else None
            if not ctx.allowed(READ, TOPIC, name or wanted.topic or ""):
                name, missing = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            self.topics.append((wanted, name, missing))

    def watched(self) -> list[tuple[str, int]]:
        return [(name, p.partition) for wanted, name, _ in self.topics if name
                for p in wanted.partitions]

    def read(self) -> tuple[list, list[int], bool]:
        """(topics out, bytes found in each, whether any partition has an error)."""
        remaining = self.max_bytes
        total, errors, out, sizes = 0, False, [], []
        for wanted, name, missing in self.topics:
            partitions, before = [], total
            topic = self.broker.topic(name) if name else None  # once per read: may be deleted
            for part in wanted.partitions:
                entry = self._partition(name, topic, part, missing, remaining, total == 0)
                size = sum(map(len, entry.records)) if isinstance(entry.records, list) else 0
                total += size
                remaining = max(0, remaining - size)
                errors |= entry.error_code != ErrorCode.NONE
                partitions.append(entry)
            out.append(TopicOut(topic=wanted.topic, topic_id=wanted.topic_id,
                                partitions=partitions))
            sizes.append(total - before)
        return out, sizes, errors

    def _partition(self, name: str | None, topic: TopicRecord | None, part, missing: ErrorCode,
                   remaining: int, first: bool) -> object:
        entry = PartitionOut(partition_index=part.partition, high_watermark=-1,
                             last_stable_offset=-1, log_start_offset=-1, records=b"",
                             aborted_transactions=[] if self.read_committed else None,
                             preferred_read_replica=-1)
        if name is None or topic is None:
            entry.error_code = missing if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return entry
        txns = self.broker.producers.txns
        key = (topic.topic_id, part.partition)
        first_open = txns.first_open(key)  # the LSO while a transaction is open here
        budget = min(part.partition_max_bytes, remaining)
        result = self.broker.store.read(name, part.partition, part.fetch_offset, budget,
                                        min_one=first,
                                        upto=first_open if self.read_committed else None)
        entry.error_code = STORE_ERRORS[result.status]
        if result.status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION:
            return entry
        end = result.log_end_offset
        entry.high_watermark = end
        entry.last_stable_offset = end if first_open is None else min(first_open, end)
        entry.log_start_offset = result.log_start_offset
        if result.status is StoreStatus.OK and result.buffers:
            entry.records = result.buffers
            if self.read_committed:
                entry.aborted_transactions = [
                    Response.AbortedTransaction(producer_id=a.producer_id,
                                                first_offset=a.first_offset)
                    for a in txns.aborted_between(key, part.fetch_offset, result.next_offset)]
        return entry


async def handle(ctx: RequestContext, request) -> object:
    if request.session_id != 0 or request.session_epoch not in NO_SESSION_EPOCHS:
        return Response(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0,
                        responses=[])
    plan = _Plan(ctx, request)
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    watched = plan.watched()
    while True:
        topics, sizes, errors = plan.read()
        left = deadline - time.monotonic()
        if sum(sizes) >= request.min_bytes or errors or left <= 0 or not watched:
            break
        if not await ctx.broker.fetch_waiters.wait(watched, left):
            topics, sizes, _ = plan.read()
            break
    throttle = ctx.quota.record_fetch(sum(sizes)) if ctx.quota is not None else 0
    if throttle:  # Kafka answers a throttled fetch empty and records nothing for it
        return Response(throttle_time_ms=throttle, error_code=ErrorCode.NONE, session_id=0,
                        responses=[])
    ctx.broker.metrics.on_fetch([name for _, name, _ in plan.topics], topics, sizes)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
                    responses=topics)

