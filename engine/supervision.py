"""Supervision of background work: every loop and worker thread runs under a Supervisor.

A task that raises is logged with its traceback and restarted after a backoff that doubles
with each failure in a row (``RESTART_MIN_S`` .. ``RESTART_MAX_S``), unless continuing is
unsafe: then ``on_failure`` runs instead (the store goes offline) and the task stays failed.
``health()`` lists every task's state for an admin endpoint; a failure is never silent.
"""
from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

log = logging.getLogger(__name__)

RESTART_MIN_S = 0.5
RESTART_MAX_S = 30.0


class TaskState(enum.Enum):
    RUNNING = "running"
    RESTARTING = "restarting"  # failed; runs again after the backoff
    FAILED = "failed"  # failed where restarting is unsafe; stays down
    STOPPED = "stopped"  # ended as asked


@dataclass
class TaskHealth:
    name: str
    state: TaskState = TaskState.RUNNING
    restarts: int = 0
    last_error: str = ""

    def failed(self, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"


class Backoff:
    """Restart delays: doubling while failures come in a row, reset by a run that lasted."""

    def __init__(self) -> None:
        self._delay = RESTART_MIN_S
        self._began = time.monotonic()

    def started(self) -> None:
        self._began = time.monotonic()

    def next_delay(self) -> float:
        if time.monotonic() - self._began >= RESTART_MAX_S:
            self._delay = RESTART_MIN_S
        delay, self._delay = self._delay, min(self._delay * 2, RESTART_MAX_S)
        return delay


class Supervisor:
    def __init__(self) -> None:
        self.tasks: dict[str, TaskHealth] = {}

    def entry(self, name: str) -> TaskHealth:
        """The health entry of ``name`` (created running): for work that reports by itself."""
        health = self.tasks.get(name)
        if health is None:
            health = self.tasks[name] = TaskHealth(name)
        health.state = TaskState.RUNNING
        return health

    def spawn(self, name: str, run: Callable[[], Awaitable[None]], *,
              stop: asyncio.Event | None = None,
              on_failure: Callable[[BaseException], None] | None = None) -> asyncio.Task:
        """Run ``run()`` as a task, restarted when it raises (``stop`` cuts a backoff short)
        or, with ``on_failure``, handed to it and left failed."""
        health = self.entry(name)
        return asyncio.get_running_loop().create_task(
            self._supervise(health, run, stop, on_failure), name=name)

    def thread(self, name: str, run: Callable[[], None], stop: threading.Event
               ) -> threading.Thread:
        """Run ``run()`` on a daemon thread, restarted when it raises until ``stop`` is set."""
        health = self.entry(name)
        thread = threading.Thread(target=self._supervise_thread, args=(health, run, stop),
                                  name=name, daemon=True)
        thread.start()
        return thread

    def health(self) -> dict[str, dict[str, object]]:
        return {name: {**asdict(h), "state": h.state.value} for name, h in self.tasks.items()}

    async def _supervise(self, health: TaskHealth, run: Callable[[], Awaitable[None]],
                         stop: asyncio.Event | None,
                         on_failure: Callable[[BaseException], None] | None) -> None:
        backoff = Backoff()
        while True:
            health.state = TaskState.RUNNING
            backoff.started()
            try:
                await run()
            except asyncio.CancelledError:
                health.state = TaskState.STOPPED
                raise
            except Exception as exc:  # noqa: BLE001 - whatever it was, it is logged and handled
                if self._failed(health, exc, on_failure):
                    return
            else:
                health.state = TaskState.STOPPED
                return
            delay = backoff.next_delay()
            if stop is None:
                await asyncio.sleep(delay)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                health.state = TaskState.STOPPED
                return

    def _supervise_thread(self, health: TaskHealth, run: Callable[[], None],
                          stop: threading.Event) -> None:
        backoff = Backoff()
        while True:
            health.state = TaskState.RUNNING
            backoff.started()
            try:
                run()
            except Exception as exc:  # noqa: BLE001 - whatever it was, it is logged and handled
                self._failed(health, exc, None)
            else:
                health.state = TaskState.STOPPED
                return
            if stop.wait(backoff.next_delay()):
                health.state = TaskState.STOPPED
                return

    @staticmethod
    def _failed(health: TaskHealth, exc: Exception,
                on_failure: Callable[[BaseException], None] | None) -> bool:
        """Log and record a failure; True when the task stays down (``on_failure`` ran)."""
        health.failed(exc)
        if on_failure is not None:
            log.error("background task %s failed; not restarted (unsafe)", health.name,
                      exc_info=exc)
            health.state = TaskState.FAILED
            on_failure(exc)
            return True
        health.restarts += 1
        health.state = TaskState.RESTARTING
        log.error("background task %s failed; restarting it (restart %d)", health.name,
                  health.restarts, exc_info=exc)
        return False
