"""Run scenarios x clients against one bootstrap address and collect the cells.

Each client's driver starts once and runs every scenario in turn; a driver that dies or stops
answering is restarted for the next scenario. After the scenarios, the cross-client check: each
client produces the same records to a topic of its own, and every other client reads them back,
compared byte for byte (key, value, headers, timestamp) with what the harness read."""
from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

from commitgate.compat_tests.clients import CLIENTS, ClientSpec, Unavailable
from commitgate.compat_tests.contract import DriverError, DriverGone, DriverProcess, Record
from commitgate.compat_tests.scenarios import (
    BASE_TS,
    SCENARIOS,
    Scenario,
    Unmet,
    expect,
    same_records,
)
from commitgate.compat_tests.session import POLL_MS, Harness, Session

CROSS = "cross-client"
HELLO_TIMEOUT_S = 120.0  # a JVM's first connection included
CROSS_RECORDS = tuple(
    Record(b"x-%d" % i, bytes([i, 0, 255]) * (i + 1), (("n", b"%d" % i), ("b", bytes([1, 128, 255]))),
           BASE_TS + 7 * i) for i in range(10)) + (
    Record(None, b"null key", (), BASE_TS + 100), Record(b"null value", None, (), BASE_TS + 101))
HARNESS_POLLS = 100


@dataclass
class Cell:
    status: str  # "pass", "fail", "n/a" or "skipped"
    detail: str = ""
    seconds: float = 0.0


@dataclass
class ClientResult:
    name: str
    language: str
    version: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass
class Matrix:
    bootstrap: str
    broker: str
    scenarios: list[str]
    clients: list[ClientResult]

    def to_json(self) -> dict:
        return asdict(self)


OnCell = Callable[[str, str, Cell], None]


def scenarios_named(names: list[str] | None) -> list[Scenario]:
    chosen = [s for s in SCENARIOS if names is None or s.name in names]
    unknown = set(names or ()) - {s.name for s in SCENARIOS} - {CROSS}
    if unknown:
        raise ValueError(f"unknown scenarios: {sorted(unknown)}")
    return chosen


def clients_named(names: list[str] | None) -> list[ClientSpec]:
    unknown = set(names or ()) - {c.name for c in CLIENTS}
    if unknown:
        raise ValueError(f"unknown clients: {sorted(unknown)}")
    return [c for c in CLIENTS if names is None or c.name in names]


class Runner:
    def __init__(self, bootstrap: str, broker: str, clients: list[ClientSpec],
                 scenarios: list[Scenario], cross: bool, on_cell: OnCell) -> None:
        self.harness = Harness(bootstrap)
        self.prefix = "compat-" + secrets.token_hex(3)
        self.clients = clients
        self.scenarios = scenarios
        self.cross = cross
        self.on_cell = on_cell
        names = [s.name for s in scenarios] + ([CROSS] if cross else [])
        self.matrix = Matrix(bootstrap, broker, names, [])
        self.sessions: dict[str, Session] = {}

    def run(self) -> Matrix:
        with tempfile.TemporaryDirectory(prefix="commitgate-compat-") as workdir:
            try:
                for spec in self.clients:
                    self._run_client(spec, Path(workdir) / spec.name)
                if self.cross:
                    self._cross_client()
            finally:
                for session in self.sessions.values():
                    session.driver.stop()
                self.harness.close()
        return self.matrix

    def _record(self, result: ClientResult, scenario: str, cell: Cell) -> None:
        result.cells[scenario] = cell
        self.on_cell(result.name, scenario, cell)

    def _run_client(self, spec: ClientSpec, workdir: Path) -> None:
        result = ClientResult(spec.name, spec.language)
        self.matrix.clients.append(result)
        try:
            command = spec.prepare(workdir)
            driver = DriverProcess(command(self.harness.bootstrap)).start()
            hello = driver.call("hello", HELLO_TIMEOUT_S)
            result.version = hello["version"]
        except Unavailable as exc:
            self._fill(result, Cell("skipped", str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - a driver that cannot start fails every cell
            self._fill(result, Cell("fail", f"driver did not start: {_first_line(exc)}"))
            return
        session = Session(spec, driver, self.harness, self.prefix)
        self.sessions[spec.name] = session
        for scenario in self.scenarios:
            self._record(result, scenario.name, self._run_one(session, scenario, command))

    def _fill(self, result: ClientResult, cell: Cell) -> None:
        for name in self.matrix.scenarios:
            self._record(result, name, cell)

    def _run_one(self, session: Session, scenario: Scenario,
                 command: Callable[[str], list[str]]) -> Cell:
        reason = session.client.not_applicable.get(scenario.feature)
        if reason is not None:
            return Cell("n/a", reason)
        started = time.monotonic()
        try:
            scenario.run(session)
            session.close_all()
            return Cell("pass", seconds=time.monotonic() - started)
        except (Unmet, DriverError, DriverGone, AssertionError, OSError) as exc:
            cell = Cell("fail", _first_line(exc), time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a harness-side error is the scenario's failure
            cell = Cell("fail", f"{type(exc).__name__}: {_first_line(exc)}",
                        time.monotonic() - started)
        self._recover(session, command)
        return cell

    def _recover(self, session: Session, command: Callable[[str], list[str]]) -> None:
        """After a failure: close what the scenario left open, or restart a dead driver."""
        try:
            session.close_all()
            return
        except (DriverError, DriverGone):
            session.open_consumers.clear()
        session.driver.stop()
        session.driver = DriverProcess(command(self.harness.bootstrap)).start()
        try:
            session.driver.call("hello", HELLO_TIMEOUT_S)
        except (DriverError, DriverGone):
            pass  # the next scenario fails with the driver's own error

    # ---- cross-client ---------------------------------------------------------------------------

    def _cross_client(self) -> None:
        written: dict[str, tuple[str, list[Record]] | str] = {}
        for name, session in self.sessions.items():
            written[name] = self._cross_produce(session)
        for result in self.matrix.clients:
            session = self.sessions.get(result.name)
            if session is None:
                continue  # skipped or never started: its cells say why
            started = time.monotonic()
            problem = self._cross_read(session, written)
            cell = Cell("fail" if problem else "pass", problem or "", time.monotonic() - started)
            self._record(result, CROSS, cell)

    def _cross_produce(self, session: Session) -> tuple[str, list[Record]] | str:
        """The topic and the records as the harness read them, or what went wrong."""
        try:
            topic = session.topic("cross", 1)
            session.produce(topic, CROSS_RECORDS)
            stored = self._harness_read(topic, len(CROSS_RECORDS))
            stamped = session.client.sets_timestamps
            same_records(stored, CROSS_RECORDS, stamped, "as stored")
            return topic, stored
        except (Unmet, DriverError, DriverGone, AssertionError, OSError) as exc:
            return _first_line(exc)

    def _cross_read(self, session: Session, written: dict) -> str | None:
        own = written.get(session.client.name)
        if isinstance(own, str):
            return f"producing: {own}"
        for producer, outcome in written.items():
            if producer == session.client.name or isinstance(outcome, str):
                continue  # a failed producer shows in its own row
            topic, stored = outcome
            try:
                got = session.read(topic, 0, "earliest", len(stored))
                same_records(got, stored, True, f"{producer}'s records")
                expect([r.offset for r in got] == [r.offset for r in stored],
                       f"{producer}'s records: offsets differ")
            except (Unmet, DriverError, DriverGone, AssertionError, OSError) as exc:
                return _first_line(exc)
        return None

    def _harness_read(self, topic: str, count: int) -> list[Record]:
        consumer = KafkaConsumer(bootstrap_servers=self.harness.bootstrap,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition(topic, 0)])
            out: list[Record] = []
            for _ in range(HARNESS_POLLS):
                if len(out) >= count:
                    break
                for batch in consumer.poll(timeout_ms=POLL_MS // HARNESS_POLLS).values():
                    out += [Record(r.key, r.value, tuple(r.headers), r.timestamp, r.partition,
                                   r.offset) for r in batch]
            return out
        finally:
            consumer.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def run_matrix(bootstrap: str, broker: str, client_names: list[str] | None = None,
               scenario_names: list[str] | None = None,
               on_cell: OnCell = lambda *_: None) -> Matrix:
    scenarios = scenarios_named(scenario_names)
    cross = scenario_names is None or CROSS in scenario_names
    return Runner(bootstrap, broker, clients_named(client_names), scenarios, cross,
                  on_cell).run()
