"""Click events for the reference pipeline: a seeded, reproducible stream produced at a set rate.

Event ``i`` of a stream has the event time ``start_ms + i * 1000 / rate`` (the moment the
generator is due to send it) minus a random lateness for a few events, so a generator that keeps
up produces event times that follow the wall clock, and a run with the same seed and start
produces the same events.
"""
from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, Producer

log = logging.getLogger(__name__)

PAGES = ("/home", "/search", "/product", "/cart", "/checkout", "/account", "/help", "/blog")
PAGE_WEIGHTS = (30, 20, 20, 10, 6, 6, 4, 4)  # skewed, so the counts per page differ
USERS = 1000
LATE_SHARE = 0.05  # the share of events that arrive late, out of event-time order
TICK_S = 0.01  # the generator sends what is due, then sleeps this long
ACK_TIMEOUT_S = 30.0  # a send not acknowledged by then fails the generator


@dataclass(frozen=True)
class ClickEvent:
    user: str
    page: str
    ts: int  # event time, ms since the epoch

    def key(self) -> bytes:
        return self.user.encode()

    def value(self) -> bytes:
        return json.dumps({"user": self.user, "page": self.page, "ts": self.ts},
                          separators=(",", ":")).encode()

    @classmethod
    def from_value(cls, value: bytes) -> ClickEvent:
        return cls(**json.loads(value))


def click_events(seed: int, start_ms: int, rate: float,
                 max_lateness_ms: int = 2000) -> Iterator[ClickEvent]:
    """The endless, reproducible stream of click events for one seed, start and rate."""
    rng = random.Random(seed)
    i = 0
    while True:
        late = rng.randint(1, max_lateness_ms) if rng.random() < LATE_SHARE else 0
        user = f"user-{rng.randrange(USERS):04d}"
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        yield ClickEvent(user, page, start_ms + int(i * 1000 / rate) - late)
        i += 1


class ClickGenerator:
    """Produces click_events() into a topic at `rate` events/s from a supervised thread."""

    def __init__(self, bootstrap: str, topic: str, rate: float, seed: int,
                 start_ms: int | None = None, limit: int | None = None,
                 max_lateness_ms: int = 2000) -> None:
        if rate <= 0:
            raise ValueError(f"the click rate must be above 0 events/s, got {rate}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.limit = limit
        self.start_ms = int(time.time() * 1000) if start_ms is None else start_ms
        self._events = click_events(seed, self.start_ms, rate, max_lateness_ms)
        self.produced = 0  # events handed to the producer
        self.error: BaseException | None = None  # why the generator stopped early, if it did
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervised, name="click-generator",
                                        daemon=True)

    def start(self) -> ClickGenerator:
        """Start producing in the background."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop producing and wait until what was sent is acknowledged (failures in .error)."""
        self._stop.set()
        self.join(timeout)

    def join(self, timeout: float) -> bool:
        """Wait for the generator to finish (its limit reached or stopped): True if it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _supervised(self) -> None:
        try:
            self._produce()
        except Exception as exc:  # reported to the caller through self.error
            log.exception("the click generator for topic %s failed", self.topic)
            self.error = exc

    def _produce(self) -> None:
        failures: list[KafkaError] = []
        # librdkafka: a send costs microseconds, where kafka-python's cost more than 10,000/s
        # allows; only failed deliveries are reported, and within ACK_TIMEOUT_S
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": int(ACK_TIMEOUT_S * 1000),
                             "delivery.report.only.error": True, "logger": log,
                             "on_delivery": lambda error, _: failures.append(error)})
        self._send_paced(producer, failures)
        unsent = producer.flush(ACK_TIMEOUT_S)
        if failures:
            raise RuntimeError(f"producing to {self.topic}: {failures[0].str()}")
        if unsent:
            raise RuntimeError(f"{unsent} events to {self.topic} not acknowledged within "
                               f"{ACK_TIMEOUT_S:g} s")

    def _send_paced(self, producer: Producer, failures: list[KafkaError]) -> None:
        started = time.monotonic()
        while not self._stop.is_set() and not failures and self.produced != self.limit:
            due = int((time.monotonic() - started) * self.rate) + 1
            if self.limit is not None:
                due = min(due, self.limit)
            while self.produced < due and not self._stop.is_set():
                event = next(self._events)
                self._send(producer, event)
                self.produced += 1
            producer.poll(0)  # serves the delivery reports
            self._stop.wait(TICK_S)

    def _send(self, producer: Producer, event: ClickEvent) -> None:
        while True:
            try:
                producer.produce(self.topic, event.value(), event.key())
                return
            except BufferError:  # librdkafka's queue is full: wait for acknowledgements
                producer.poll(TICK_S)
