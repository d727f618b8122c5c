"""Which quota applies to a client, the rates measured against it, and throttling.

Resolution is Kafka's DefaultQuotaCallback, for each quota key apart: the first entity with that
key among user+client-id, user+default client-id, user, default user+client-id, default
user+default client-id, default user, client-id, default client-id. The user is the name of the
connection's principal (SASL's user, a client certificate's mapped subject), ``ANONYMOUS``
without authentication, as in Kafka. A rate is shared by all the
connections the matched entity covers (Kafka's metric tags: a default entity gives each user or
client id a rate of its own). A client's resolved quota is cached by user and client id (one
dict lookup per request) until AlterClientQuotas changes something; with no quota configured a request pays
one empty-dict test.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from commitgate.gateway.quotas.rate import QuotaRate
from commitgate.gateway.quotas.store import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaStore,
    Entity,
)

ANONYMOUS = "ANONYMOUS"
PRODUCE_KEY = 0
EXPIRY_MS = 3_600_000  # Kafka's inactive quota sensors expire after an hour
SWEEP_MS = 60_000
MAX_CACHED = 10_000  # client ids resolved; more starts a sweep
PERCENT_PER_SECOND = 100.0  # request time is recorded as percent-seconds of one thread


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class ClientQuota:
    """The rates one client id is measured by (None: no quota of that kind)."""

    produce: QuotaRate | None
    fetch: QuotaRate | None
    request: QuotaRate | None

    def fetch_max_bytes(self, wanted: int) -> int:
        """A fetch reads at most the quota of all windows but one (Kafka's
        getMaxValueInQuotaWindow), which bounds a throttled consumer's response."""
        rate = self.fetch
        if rate is None:
            return wanted
        return min(wanted, max(1, int(rate.bound * (rate.num - 1) * rate.window_ms / 1000)))

    def record_fetch(self, nbytes: int) -> int:
        """The throttle time of a fetch answering ``nbytes``; a throttled fetch is answered
        empty, so its bytes are taken back (as Kafka does)."""
        rate = self.fetch
        if rate is None:
            return 0
        now = _now_ms()
        throttle = rate.record(nbytes, now)
        if throttle:
            rate.unrecord(nbytes, now)
            _count(rate, throttle)
        return throttle

    def record_produce(self, nbytes: int) -> int:
        return _record(self.produce, nbytes)

    def record_request(self, seconds: float) -> int:
        return _record(self.request, seconds * PERCENT_PER_SECOND)


def _record(rate: QuotaRate | None, value: float) -> int:
    if rate is None:
        return 0
    throttle = rate.record(value, _now_ms())
    if throttle:
        _count(rate, throttle)
    return throttle


def _count(rate: QuotaRate, throttle_ms: int) -> None:
    rate.throttled += 1
    rate.throttle_ms += throttle_ms


class QuotaManager:
    def __init__(self, store: ClientQuotaStore, window_num: int, window_seconds: int) -> None:
        self.store = store
        self.window_num = window_num
        self.window_ms = window_seconds * 1000.0
        self._cache: dict[tuple[str, str], ClientQuota] = {}
        # (quota key, user tag, client-id tag) -> its rate; "" where the entity has no such part
        self._rates: dict[tuple[str, str, str], QuotaRate] = {}
        self._swept_ms = _now_ms()
        store.changed = self._cache.clear

    def resolve(self, client_id: str | None, user: str = ANONYMOUS) -> ClientQuota | None:
        """The quota of a request from ``client_id`` of ``user`` (None when no quota is
        configured)."""
        if not self.store.entities:
            return None
        found = self._cache.get((user, client_id or ""))
        if found is None:
            found = self._resolve(user, client_id or "")
        return found

    def _resolve(self, user: str, client_id: str) -> ClientQuota:
        now = _now_ms()
        if now - self._swept_ms > SWEEP_MS or len(self._cache) >= MAX_CACHED:
            self._sweep(now)
        quota = ClientQuota(*(self._rate(key, user, client_id, now) for key in
                              (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)))
        self._cache[(user, client_id)] = quota
        return quota

    def _rate(self, key: str, user: str, client_id: str, now_ms: float) -> QuotaRate | None:
        for entity, tags in _candidates(user, client_id):
            bound = self.store.entities.get(entity, {}).get(key)
            if bound is None:
                continue
            rate = self._rates.get((key, *tags))
            if rate is None:
                rate = self._rates[(key, *tags)] = QuotaRate(self.window_num, self.window_ms,
                                                             bound, now_ms)
            rate.bound = bound  # an altered quota applies to the rate measured so far
            return rate
        return None

    def _sweep(self, now_ms: float) -> None:
        """Forget rates idle for an hour, and every cached resolution (they hold rates)."""
        self._swept_ms = now_ms
        self._cache.clear()
        for tags in [t for t, rate in self._rates.items() if now_ms - rate.last_ms > EXPIRY_MS]:
            del self._rates[tags]

    def throttle_counts(self) -> Iterator[tuple[str, str, str, int, int]]:
        """(quota key, user, client id, responses throttled, their throttle ms) per rate."""
        for (key, user, client_id), rate in sorted(self._rates.items()):
            yield key, user, client_id, rate.throttled, rate.throttle_ms


def _candidates(user: str, client_id: str) -> Iterator[tuple[Entity, tuple[str, str]]]:
    """Kafka's lookup order, each with the rate's tags (user, client id)."""
    yield ((CLIENT_ID, client_id), (USER, user)), (user, client_id)
    yield ((CLIENT_ID, None), (USER, user)), (user, client_id)
    yield ((USER, user),), (user, "")
    yield ((CLIENT_ID, client_id), (USER, None)), (user, client_id)
    yield ((CLIENT_ID, None), (USER, None)), (user, client_id)
    yield ((USER, None),), (user, "")
    yield ((CLIENT_ID, client_id),), ("", client_id)
    yield ((CLIENT_ID, None),), ("", client_id)


class _Timed:
    """Drives a handler's coroutine and adds up the time of its steps: the broker's own time on
    the request (what request_percentage measures), not the time it waits."""

    __slots__ = ("busy", "coro")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.busy = 0.0

    def __await__(self):
        coro, value, error = self.coro, None, None
        while True:
            start = time.perf_counter()
            try:
                step = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.busy += time.perf_counter() - start
                return done.value
            self.busy += time.perf_counter() - start
            try:
                value, error = (yield step), None
            except GeneratorExit:
                coro.close()
                raise
            except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - to the handler
                value, error = None, exc


async def enforced(coro: Coroutine[Any, Any, Any], quota: ClientQuota, api_key: int,
                   size: int, mute) -> Any:
    """Run a handler under ``quota``: record the produce bytes (the request's size) and the
    request time, put the longest throttle time in the response (Fetch sets its own) and mute
    the connection for it (KIP-219: the answer goes at once, the client backs off, and the
    broker reads nothing more from it meanwhile)."""
    timed = _Timed(coro) if quota.request is not None else None
    response = await (timed if timed is not None else coro)
    throttle = getattr(response, "throttle_time_ms", 0) or 0
    if api_key == PRODUCE_KEY:
        throttle = max(throttle, quota.record_produce(size))
    if timed is not None and response is not None:  # acks=0: no request quota, as Kafka
        throttle = max(throttle, quota.record_request(timed.busy))
    if throttle > 0:
        if response is not None:
            response.throttle_time_ms = throttle
        mute(throttle)
    return response
