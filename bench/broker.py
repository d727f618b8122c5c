"""Broker throughput and latency side by side: CommitGate and peer brokers in one run.

Starts fresh CommitGates (ASYNC_FLUSH, and SYNC_FLUSH for the workloads meant for it), the
peers that are installed (noida-db on disk, Tansu in memory) and any broker given by address,
then runs every workload against every broker in turn, round after round (A B A B ...), so
machine drift hits all alike. Load comes from librdkafka (confluent-kafka) in separate
processes (``bench/loadgen.py``). Prints each figure's median and its ratio to CommitGate's;
writes ``results.json`` and PNG charts to the output directory.

The brokers it starts die with it: a SIGTERM or Ctrl-C kills them and removes their directories
before the run exits (with 128 + the signal's number); a SIGKILL leaves the kernel to kill them
(``commitgate.launcher``), and their directories to the next run (``remove_dead_runs``).
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from commitgate.bench import charts, flame, topics
from commitgate.bench.profiles import (
    FETCH_1,
    FETCH_COMMITTED,
    PRODUCE_ACKS1,
    PRODUCE_TXN,
    PROFILES,
    Profile,
)
from commitgate.bench.targets import PEERS, Target, by_address, start_commitgate
from commitgate.bench.workloads import (
    FETCH,
    LATENCY,
    PRODUCE,
    Measurement,
    Workload,
    fetch,
    latency,
    produce,
    read_back,
    transactions_missing,
    warm_partitions,
)

HALF = 0.5  # the latency workload's offered load, a share of the slowest broker's maximum
# Before each timed part, every broker must be idle: noida-db was seen burning a core for 10-20 s
# after its own rounds, inside the next broker's round (CommitGate's 200-producer p50 went from
# 12 to 210 ms in the round after one). Idle: under IDLE_CORES together over one IDLE_WINDOW_S.
IDLE_CORES = 0.1
IDLE_WINDOW_S = 0.5
SETTLE_LIMIT_S = 30.0
NO_TRANSACTIONS = "n/a: no transactions"
FLAMED = (PRODUCE_ACKS1, FETCH_1, PRODUCE_TXN, FETCH_COMMITTED)  # --profile-broker's workloads


def start_targets(root: Path, against: list[str], peers: bool, console: Console,
                  left_out: list[str], targets: list[Target]) -> None:
    """Adds the brokers of the run to ``targets`` as each starts (so that whoever stops them
    sees those started before an interruption); peers that could not be measured are added to
    ``left_out`` with the reason (the table's caption repeats them)."""
    targets.append(start_commitgate(root))
    targets.append(start_commitgate(root, "SYNC_FLUSH"))
    for name, (start, install) in PEERS.items() if peers else ():
        try:
            peer = start(root)
        except RuntimeError as exc:
            left_out.append(f"{name}: did not start ({exc})")
            continue
        if peer is None:
            left_out.append(f"{name}: not installed in this environment ({install})")
        else:
            targets.append(peer)
    for reason in left_out:
        console.print(f"[yellow]left out: {reason}[/]")
    targets.extend(by_address(spec) for spec in against)


ROOT_PREFIX = "commitgate-bench-"


def make_root() -> Path:
    """The run's temporary directory, named after this process so that a later run can tell
    whether its owner is still alive."""
    return Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-"))


def remove_dead_runs(parent: Path | None = None) -> list[Path]:
    """Removes the directories that runs killed by SIGKILL left in the temp folder (their
    brokers were killed with them): those whose owner process is gone. Returns them."""
    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        owner = path.name[len(ROOT_PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or not path.is_dir() or _alive(int(owner)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


@contextmanager
def stop_on_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """SIGTERM and SIGINT run ``on_signal`` in the main thread, then end the process with
    128 + the signal's number; the previous handlers return after. The handler exits rather
    than raising: an exception raised in a signal handler can surface inside a C extension's
    call (librdkafka's admin futures) as a SystemError that no ``except`` expects."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):  # once: the clean-up is bounded
            signal.signal(sig, signal.SIG_IGN)
        try:
            on_signal(signum)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(128 + signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _abandon(signum: int, root: Path, targets: list[Target]) -> None:
    """A signal ends the run: its data is thrown away, so the brokers are killed, not stopped."""
    # straight to the descriptor: a live progress display holds what the console prints
    os.write(2, f"{signal.Signals(signum).name}: killing {len(targets)} broker(s), removing "
                f"{root}\n".encode())
    for target in targets:
        target.kill()
    shutil.rmtree(root, ignore_errors=True)


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", name).strip("-")


class Harness:
    """One run: the targets, the profile, and every measurement taken so far."""

    def __init__(self, targets: list[Target], profile: Profile, console: Console) -> None:
        self.targets = targets
        self.profile = profile
        self.console = console
        self.backlogs: dict[tuple[str, str], Measurement] = {}  # (target, topic): backlog written
        self.no_transactions: dict[str, str] = {}  # target: why it has none ('' if it has)

    def eligible(self, workload: Workload) -> list[Target]:
        return [t for t in self.targets if workload.sync_flush or not t.sync_flush]

    def measure(self, target: Target, workload: Workload, index: int) -> Measurement:
        """One measurement, with its untimed set-up and clean-up around it."""
        if workload.transactional and self._lacks_transactions(target):
            return Measurement({}, 0, 0, None, 0.0, 0.0, skipped=NO_TRANSACTIONS)
        if workload.kind == FETCH:
            topic = self._backlog(target, workload)
            backlog = self.backlogs[target.name, topic]
            return self._timed(target, lambda: fetch(target, workload, topic, backlog))
        topic = f"bench-{_slug(workload.name)}-{index}"
        topics.create(target.bootstrap, topic, workload.topic_partitions)
        try:
            if workload.kind == LATENCY:
                rate = self.half_load()
                return self._timed(target, lambda: latency(target, workload, topic, rate))
            warm = workload.partitions if workload.partitions > 1 else 0
            if warm:
                warm_partitions(target, topic, warm)
            measurement = self._timed(target, lambda: produce(target, workload, topic))
            if self.profile.verify and not measurement.error:
                measurement.consumed = read_back(target, topic, workload.partitions,
                                                 measurement.acked + warm) - warm
            return measurement
        finally:
            topics.delete(target.bootstrap, topic)

    def _timed(self, target: Target, run: Callable[[], Measurement]) -> Measurement:
        settle_s = self._settle()
        others = [t for t in self.targets if t is not target]
        before, others_before = target.cpu_seconds(), _cpu_total(others)
        measurement = run()
        measurement.settle_s = settle_s
        if before is not None:
            measurement.broker_cpu_s = target.cpu_seconds() - before
        if others_before is not None:
            measurement.others_cpu_s = _cpu_total(others) - others_before
        return measurement

    def _settle(self) -> float:
        """Wait (bounded) until no broker does background work; returns the seconds waited."""
        start = time.monotonic()
        last = _cpu_total(self.targets)
        while last is not None and time.monotonic() - start < SETTLE_LIMIT_S:
            time.sleep(IDLE_WINDOW_S)
            now = _cpu_total(self.targets)
            if now - last < IDLE_CORES * IDLE_WINDOW_S:
                break
            last = now
        return time.monotonic() - start

    def _lacks_transactions(self, target: Target) -> bool:
        """Probed once per broker (untimed): do its transactions fail, or leak aborted
        records to a read_committed reader?"""
        if target.name not in self.no_transactions:
            topic = "bench-transactions-probe"
            topics.create(target.bootstrap, topic, 1)
            try:
                reason = transactions_missing(target, topic)
            finally:
                topics.delete(target.bootstrap, topic)
            self.no_transactions[target.name] = reason
            if reason:
                self.console.print(f"[yellow]{target.name}: {NO_TRANSACTIONS} ({reason})[/]")
        return bool(self.no_transactions[target.name])

    def _backlog(self, target: Target, workload: Workload) -> str:
        """The topic a fetch workload reads, written once (untimed) before its first round;
        fetch workloads of one size, consumer count and transaction shape share it."""
        topic = f"bench-backlog-{workload.size}-{workload.consumers}"
        if workload.txn_records:
            topic += f"-txn{workload.txn_records}-abort{workload.abort_every}"
        if (target.name, topic) not in self.backlogs:
            topics.create(target.bootstrap, topic, workload.consumers)
            writer = Workload("backlog", PRODUCE, workload.count, size=workload.size,
                              partitions=workload.consumers,
                              acks="all" if workload.transactional else "1",
                              idempotent=workload.transactional,
                              txn_records=workload.txn_records, abort_every=workload.abort_every)
            self.backlogs[target.name, topic] = produce(target, writer, topic)
        return topic

    def half_load(self) -> float:
        """Records/s: half the 1 KiB acks=1 maximum of the slowest broker measured."""
        maxima = [t.median(PRODUCE_ACKS1, "records/s") for t in self.targets if not t.sync_flush]
        return HALF * min((m for m in maxima if m), default=1_000.0)

    def plan(self) -> Iterator[tuple[Workload, int, Target]]:
        """Round after round, each broker in turn; a workload held against another (``versus``,
        listed right after it) runs beside it on the broker, so both see the same drift."""
        for group in _groups(self.profile.workloads):
            for index in range(self.profile.rounds):
                for target in self.targets:
                    yield from ((w, index, target) for w in group if target in self.eligible(w))

    def run(self) -> None:
        plan = list(self.plan())
        columns = (TextColumn("{task.description:<52}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            task = progress.add_task("starting", total=len(plan))
            for workload, index, target in plan:
                progress.update(task, description=f"{workload.name} | {target.name}")
                measurement = self.measure(target, workload, index)
                target.results.setdefault(workload.name, []).append(measurement.as_dict())
                self._log(target, workload, index, measurement)
                progress.advance(task)

    def _log(self, target: Target, workload: Workload, index: int, m: Measurement) -> None:
        if m.skipped:
            self.console.print(f"  {workload.name} | {target.name} round {index + 1}: {m.skipped}")
            return
        if m.error:
            self.console.print(f"[red]{workload.name} | {target.name} round {index + 1}: "
                               f"{m.error}[/]")
            return
        shown = ", ".join(f"{k} {v:,.1f}" for k, v in m.figures.items())
        cpu = "" if m.broker_cpu_s is None else f", broker {m.broker_cpu_s / m.seconds:.2f}"
        if m.others_cpu_s is not None:
            cpu += f", other brokers {m.others_cpu_s / m.seconds:.2f}"
        if m.settle_s >= 1:
            cpu += f"; waited {m.settle_s:.0f} s for the brokers to idle"
        self.console.print(f"  {workload.name} | {target.name} round {index + 1}: {shown} "
                           f"(CPU cores busy: generators {m.generator_cpu_s / m.seconds:.2f}{cpu})")


def _groups(workloads: list[Workload]) -> list[list[Workload]]:
    """Workloads in plan order, each with those held against it (listed right after it)."""
    groups: list[list[Workload]] = []
    for workload in workloads:
        if workload.versus and groups and groups[-1][0].name == workload.versus:
            groups[-1].append(workload)
        else:
            groups.append([workload])
    return groups


def _cpu_total(targets: list[Target]) -> float | None:
    """CPU seconds of the brokers this run started (None if it started none)."""
    seconds = [s for s in (t.cpu_seconds() for t in targets) if s is not None]
    return sum(seconds) if seconds else None


def report(targets: list[Target], profile: Profile, console: Console,
           left_out: list[str] = ()) -> list[dict]:
    """The table of medians (each peer's ratio to CommitGate in brackets); returns its rows."""
    table = Table(title="Median of rounds (in brackets: x CommitGate's figure)",
                  caption="Left out: " + "; ".join(left_out) if left_out else None)
    table.add_column("workload")
    table.add_column("figure")
    for target in targets:
        table.add_column(target.name, justify="right")
    ours, rows = targets[0], []
    for workload in profile.workloads:
        names = dict.fromkeys(f for t in targets for m in t.results.get(workload.name, [])
                              for f in m["figures"])
        for figure in names:
            mine = ours.median(workload.name, figure)
            medians = {t.name: t.median(workload.name, figure) for t in targets}
            rows.append({"workload": workload.name, "figure": figure, "medians": medians})
            table.add_row(workload.name, figure, *(
                _cell(value, mine, target is ours, _skipped(target, workload))
                for target, value in zip(targets, medians.values(), strict=True)))
    console.print(table)
    return rows


def ratios(targets: list[Target], profile: Profile, console: Console) -> list[dict]:
    """Each ``versus`` workload's MB/s as a share of its twin's, per broker, against its goal."""
    rows = []
    for workload in (w for w in profile.workloads if w.versus):
        for target in targets:
            mine, twin = (target.median(w, "MB/s") for w in (workload.name, workload.versus))
            if not mine or not twin:
                continue
            share = mine / twin
            rows.append({"workload": workload.name, "versus": workload.versus,
                         "target": target.name, "share": share, "goal": workload.goal})
            verdict = "[green]met[/]" if share >= workload.goal else "[red]missed[/]"
            console.print(f"{target.name}: {workload.name} / {workload.versus} = {share:.0%} of "
                          f"MB/s (target {workload.goal:.0%}: {verdict})")
    return rows


def _skipped(target: Target, workload: Workload) -> str:
    return next((m["skipped"] for m in target.results.get(workload.name, []) if m["skipped"]),
                "")


def _cell(value: float | None, mine: float | None, is_ours: bool, skipped: str = "") -> str:
    if value is None:
        return skipped or "-"
    ratio = "" if is_ours or not mine else f" ({value / mine:.2f}x)"
    return f"{value:,.1f}{ratio}"


def write_json(out: Path, profile_name: str, targets: list[Target], rows: list[dict],
               shares: list[dict], started: float) -> Path:
    path = out / "results.json"
    path.write_text(json.dumps({
        "profile": profile_name, "started": started, "seconds": time.time() - started,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "processor": platform.processor()},
        "targets": [{"name": t.name, "bootstrap": t.bootstrap, "measurements": t.results}
                    for t in targets],
        "medians": rows, "ratios": shares}, indent=1))
    return path


def main(profile_name: str = "quick", against: list[str] | None = None, out: Path | None = None,
         profile_broker: bool = False, peers: bool = True) -> list[Target]:
    console = Console()
    profile = PROFILES[profile_name]
    out = out or Path("bench-results")
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    for path in remove_dead_runs():
        console.print(f"removed {path}, left by a run that was killed")
    left_out: list[str] = []
    targets: list[Target] = []
    root = make_root()
    with stop_on_signals(lambda signum: _abandon(signum, root, targets)):
        try:
            start_targets(root, against or [], peers, console, left_out, targets)
            harness = Harness(targets, profile, console)
            harness.run()
            if profile_broker:
                flame.record(targets[0], [w for w in profile.workloads if w.name in FLAMED],
                             harness.measure, out, profile.profile_seconds, console)
        finally:
            for target in targets:
                target.stop()
            shutil.rmtree(root, ignore_errors=True)
    rows = report(targets, profile, console, left_out)
    shares = ratios(targets, profile, console)
    console.print(f"wrote {write_json(out, profile_name, targets, rows, shares, started)}")
    for chart in charts.draw(targets, profile, out):
        console.print(f"wrote {chart}")
    return targets


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "quick")
