"""Does the admin HTTP listener slow the Kafka path? Produce and fetch MB/s of a broker whose
admin listener is on and scraped (``/metrics``) every second, against a broker with it off
(``admin.listeners=``), same settings otherwise, in rounds that alternate between the two (and
alternate which goes first) in one run, so that the machine's drift hits both alike.

Each round produces ``records`` records of ``size`` bytes over ``partitions`` partitions of a
new topic with a librdkafka producer process (bench/loadgen.py), then reads them back from the
start with a librdkafka consumer process; MB/s is over each process's own timed window. Beside
it, the broker's CPU time (user + system, /proc) per GB moved: on a machine shared with other
work, MB/s swings with the neighbours while CPU time per byte barely does. The figures are the
medians over the rounds; the ratios are on / off (MB/s: 1.00 is no cost; CPU: above 1.00 is),
of the medians and, "paired", the median of each round's own ratio (the two sides of a round
run one after the other, so slow drift of the machine cancels).

    python -m commitgate.bench.admin [--records N] [--size B] [--partitions P] [--rounds R]
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from commitgate.bench.loadgen import mb_per_s, run_process
from commitgate.launcher import BrokerProcess

GB = 1e9
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass
class Scraper:
    """Scrapes /metrics every ``interval_s`` on a thread while a round of the "on" broker runs,
    over one kept-alive connection, as Prometheus does."""

    port: int
    interval_s: float
    scrapes: int = 0
    seconds: float = 0.0  # spent waiting for the answers
    failure: str = ""  # why a scrape failed: the run is then void
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.failure:
            raise RuntimeError(f"scraping /metrics failed: {self.failure}")

    def _run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                connection.request("GET", "/metrics")
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    self.failure = f"status {response.status}"
                    return
                self.seconds += time.monotonic() - began
                self.scrapes += 1
                self._stop.wait(self.interval_s)
        except (OSError, http.client.HTTPException) as exc:  # reported when the round ends
            self.failure = str(exc)
        finally:
            connection.close()


@dataclass
class Side:
    name: str
    broker: BrokerProcess
    produce_mbs: list[float] = field(default_factory=list)
    fetch_mbs: list[float] = field(default_factory=list)
    produce_cpu: list[float] = field(default_factory=list)  # broker CPU seconds per GB
    fetch_cpu: list[float] = field(default_factory=list)
    scraper: Scraper | None = None

    def cpu_s(self) -> float:
        """The broker process's CPU time so far (utime + stime)."""
        fields = Path(f"/proc/{self.broker.process.pid}/stat").read_text().rsplit(")", 1)[1]
        utime, stime = fields.split()[11:13]
        return (int(utime) + int(stime)) / TICKS_PER_S


def _round(side: Side, topic: str, args: argparse.Namespace) -> None:
    common = ["--bootstrap", side.broker.bootstrap, "--topic", topic, "--count",
              str(args.records), "--size", str(args.size)]
    began = side.cpu_s()
    produced = run_process("produce", *common, "--partitions", str(args.partitions))
    middle = side.cpu_s()
    fetched = run_process("consume", *common, "--until-eof",
                       "--partition-list", ",".join(map(str, range(args.partitions))))
    if fetched["records"] != args.records:
        raise RuntimeError(f"{side.name}: read {fetched['records']} of {args.records} records")
    side.produce_mbs.append(mb_per_s(produced))
    side.fetch_mbs.append(mb_per_s(fetched))
    side.produce_cpu.append((middle - began) / (produced["bytes"] / GB))
    side.fetch_cpu.append((side.cpu_s() - middle) / (fetched["bytes"] / GB))


def _measure(sides: list[Side], args: argparse.Namespace) -> None:
    for number in range(args.rounds):
        ordered = sides if number % 2 == 0 else sides[::-1]
        for side in ordered:
            topic = f"round-{number}"
            if side.scraper is None:
                _round(side, topic, args)
                continue
            with side.scraper:
                _round(side, topic, args)
        on, off = sides
        print(f"round {number + 1}/{args.rounds}: produce {on.produce_mbs[-1]:.1f} (on) / "
              f"{off.produce_mbs[-1]:.1f} (off) MB/s, {on.produce_cpu[-1]:.2f} / "
              f"{off.produce_cpu[-1]:.2f} CPU s/GB; fetch {on.fetch_mbs[-1]:.1f} / "
              f"{off.fetch_mbs[-1]:.1f} MB/s, {on.fetch_cpu[-1]:.2f} / "
              f"{off.fetch_cpu[-1]:.2f} CPU s/GB", flush=True)


def _report(on: Side, off: Side) -> None:
    print(f"\n{'median over rounds':<26}{'admin on':>12}{'admin off':>12}{'on / off':>10}"
          f"{'paired':>10}")
    for what, mine, theirs in (("produce MB/s", on.produce_mbs, off.produce_mbs),
                               ("fetch MB/s", on.fetch_mbs, off.fetch_mbs),
                               ("produce broker CPU s/GB", on.produce_cpu, off.produce_cpu),
                               ("fetch broker CPU s/GB", on.fetch_cpu, off.fetch_cpu)):
        a, b = statistics.median(mine), statistics.median(theirs)
        paired = [x / y for x, y in zip(mine, theirs) if y]
        print(f"{what:<26}{a:>12.2f}{b:>12.2f}{_ratio(a, b):>10}"
              f"{f'{statistics.median(paired):.3f}' if paired else 'n/a':>10}")
    scraper = on.scraper
    print(f"\n{scraper.scrapes} scrapes of /metrics while the 'on' broker was measured, "
          f"{1000 * scraper.seconds / max(scraper.scrapes, 1):.1f} ms each on average")


def _ratio(a: float, b: float) -> str:
    """n/a when the broker's CPU time was below the clock's tick (a tiny run)."""
    return f"{a / b:.3f}" if b else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="per round and broker")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds")
    args = parser.parse_args(argv)
    settings = {"num.partitions": str(args.partitions)}
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-admin-") as tmp, \
            BrokerProcess(Path(tmp) / "on", settings) as on_broker, \
            BrokerProcess(Path(tmp) / "off", {**settings, "admin.listeners": ""}) as off_broker:
        on = Side("on", on_broker, scraper=Scraper(on_broker.admin_port, args.scrape_interval))
        off = Side("off", off_broker)
        print(f"{args.rounds} rounds of {args.records:,} records of {args.size} bytes over "
              f"{args.partitions} partitions per broker; /metrics scraped every "
              f"{args.scrape_interval:g}s on the 'on' broker", flush=True)
        _measure([on, off], args)
        _report(on, off)


if __name__ == "__main__":
    main()
