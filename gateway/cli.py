"""The ``commitgate`` command line."""
from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from gateway import settings
from gateway.groups_cli import groups_app

app = typer.Typer(help="CommitGate: a Kafka-compatible broker over a RocketMQ-style store.",
                  no_args_is_help=True, add_completion=False)
bench_app = typer.Typer(help="Benchmarks (figures, not tests).", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(groups_app, name="groups")


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command(help="Start CommitGate on the store in log.dirs (default ./data).\n\n"
                  "Settings (as --override KEY=VALUE or lines of --config FILE):\n\n"
                  + settings.describe().replace("\n", "\n\n"))
def serve(
    config: Annotated[Path | None, typer.Option(help="a Kafka-style .properties file")] = None,
    override: Annotated[list[str], typer.Option(help="KEY=VALUE, may repeat")] = [],  # noqa: B006
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    _setup_logging(log_level)
    try:
        broker_config = settings.load(config, override)
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from None
    from engine import StoreLocked, VolumeTooSmall
    from gateway.server import run_until_signal

    try:
        _run(run_until_signal(broker_config))
    except (OSError, StoreLocked, VolumeTooSmall) as exc:  # port taken, data directory in
        # use, unwritable or on too small a filesystem
        logging.getLogger("commitgate").error("CommitGate cannot start: %s", exc)
        raise typer.Exit(1) from None


@app.command(help="Append, read back, restart and verify a store in a temporary directory.")
def selfcheck(log_level: str = "warning") -> None:
    _setup_logging(log_level)
    from gateway.selfcheck import run_selfcheck

    _run(run_selfcheck())


@app.command(help="The compatibility matrix: every scenario with every client (kafka-python, "
                  "aiokafka, confluent-kafka, the Java client 3.9 and 4.3, kafkajs, kcat), against a fresh CommitGate on a free port or the "
                  "broker at --bootstrap. Writes compat.json, compat.md and compat.html.")
def compat(
    bootstrap: Annotated[str | None, typer.Option(help="HOST:PORT of a running broker")] = None,
    out: Annotated[Path, typer.Option(help="where the reports go")] = Path("compat-results"),
    clients: Annotated[list[str] | None, typer.Option(help="client names, may repeat")] = None,
    scenarios: Annotated[list[str] | None, typer.Option(help="scenario names, may repeat")] = None,
) -> None:
    from compat_tests.cli import run as run_compat

    try:
        run_compat(bootstrap, out, clients or None, scenarios or None)
    except ValueError as exc:  # an unknown client or scenario name
        raise typer.BadParameter(str(exc)) from None


@app.command(help="Fuzz a broker with requests built from Kafka's message schemas (every API it "
                  "advertises, versions inside and outside the range, damaged bytes and frames); "
                  "checks after every batch that it still answers ApiVersions and Metadata. "
                  "Exits 1 on findings.")
def fuzz(
    bootstrap: Annotated[str, typer.Option(help="HOST:PORT of the broker")] = "localhost:9092",
    cases: Annotated[int, typer.Option(help="cases to send")] = 20_000,
    seed: Annotated[int, typer.Option(help="the same seed sends the same bytes")] = 0,
    first: Annotated[int, typer.Option(help="number of the first case (replay a finding)")] = 0,
    apis: Annotated[list[str] | None, typer.Option(help="API names or keys, may repeat")] = None,
    connections: Annotated[int, typer.Option(help="connections used at once")] = 8,
    dump: Annotated[Path | None, typer.Option(help="write the bytes of cases with findings "
                                                   "or timeouts here")] = None,
    broker_log: Annotated[Path | None, typer.Option(help="the broker's log, scanned for new "
                                                         "tracebacks")] = None,
) -> None:
    from compat_tests.fuzz import BrokerDown, FuzzOptions, api_keys
    from compat_tests.fuzz import main as fuzz_main

    if min(cases, connections) < 1:
        raise typer.BadParameter("--cases and --connections must be at least 1")
    try:
        options = FuzzOptions(bootstrap=bootstrap, cases=cases, seed=seed, first=first,
                              apis=api_keys(apis), connections=connections, dump=dump,
                              broker_log=broker_log)
        report = fuzz_main(options)
    except ValueError as exc:  # an unknown API name, or none of them advertised
        raise typer.BadParameter(str(exc)) from None
    except BrokerDown as exc:  # before the first case: nothing to fuzz
        typer.echo(f"no broker to fuzz: {exc}", err=True)
        raise typer.Exit(2) from None
    if report.findings:
        raise typer.Exit(1)


@bench_app.command("store", help="Measure the store alone: raw disk, appends, reads, partitions.")
def bench_store(
    data_dir: Annotated[Path | None, typer.Option(help="where to write (default: a temp dir)")] = None,
    volume_mb: Annotated[int, typer.Option(
        help="MiB written per measurement, but for the partition counts")] = 512,
    partition_volume_mb: Annotated[int | None, typer.Option(
        help="MiB written per partition-count measurement (default: 10 batches for each of "
             "10,000 partitions)")] = None,
    rounds: Annotated[int, typer.Option(help="times each measurement runs (best is shown)")] = 2,
) -> None:
    from bench.store import main as bench_main

    bench_main(data_dir, volume_mb, rounds, partition_volume_mb)


@bench_app.command("lifecycle", help="The log's lifecycle on the store alone: produce MB/s with "
                                     "the CommitLog cleaner idle, relocating and compacting "
                                     "beside the appends; the cleaner's own MB/s; disk used "
                                     "against live data after a long mixed run in simulated "
                                     "time, checked against the documented bound.")
def bench_lifecycle(
    data_dir: Annotated[Path | None, typer.Option(help="where to write (default: a temp dir)")] = None,
    volume_mb: Annotated[int, typer.Option(
        help="MiB appended in each timed produce window; the backlog the cleaner works "
             "through is twice this")] = 512,
    segment_mb: Annotated[int, typer.Option(help="CommitLog segment size in MiB")] = 16,
    rounds: Annotated[int, typer.Option(
        help="produce rounds, each mode once per round (the ratio is the median of the "
             "rounds' own)")] = 5,
    minutes: Annotated[int, typer.Option(help="simulated minutes of the mixed run")] = 60,
) -> None:
    if min(volume_mb, segment_mb, rounds, minutes) < 1:
        raise typer.BadParameter("--volume-mb, --segment-mb, --rounds and --minutes must be at "
                                 "least 1")
    from bench.lifecycle import main as lifecycle_main

    lifecycle_main(data_dir, volume_mb, segment_mb, rounds, minutes)


@bench_app.command("codec", help="Protocol codecs: Produce decode and Fetch encode, "
                                 "CommitGate vs kio (if installed) vs kafka-python.")
def bench_codec(
    rounds: Annotated[int, typer.Option(help="times each measurement runs (best is shown)")] = 3,
) -> None:
    from bench.codec import main as codec_main

    codec_main(rounds)


@bench_app.command("brokers", help="Throughput and latency of CommitGate (ASYNC_FLUSH and "
                                   "SYNC_FLUSH) beside noida-db, Tansu (pip install -e "
                                   "'.\\[bench]') and any broker given by address, in alternating "
                                   "rounds; a table of medians, results.json and PNG charts.")
def bench_brokers(
    against: Annotated[list[str], typer.Option(help="NAME=HOST:PORT, may repeat")] = [],  # noqa: B006
    profile: Annotated[str, typer.Option(help="tiny, quick (< 3 min) or full (< 30 min)")] = "quick",
    out: Annotated[Path, typer.Option(help="where results and charts go")] = Path("bench-results"),
    profile_broker: Annotated[bool, typer.Option(help="py-spy flame graphs of CommitGate under "
                                                      "produce and fetch")] = False,
    peers: Annotated[bool, typer.Option(help="start noida-db and Tansu if installed")] = True,
) -> None:
    from bench.broker import main as brokers_main
    from bench.profiles import PROFILES
    from bench.targets import by_address

    if profile not in PROFILES:
        raise typer.BadParameter(f"--profile is one of {', '.join(PROFILES)}")
    for spec in against:
        try:
            by_address(spec)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    brokers_main(profile, against, out, profile_broker, peers)


@bench_app.command("connections", help="Broker memory per idle connection and per request in "
                                       "flight (a size prefix alone, half a body, all but the "
                                       "last byte), on a fresh broker.")
def bench_connections(
    connections: Annotated[int, typer.Option(help="idle connections opened")] = 2000,
    requests: Annotated[int, typer.Option(help="requests held in flight at once")] = 100,
    request_mb: Annotated[int, typer.Option(help="size of each request in MiB")] = 1,
) -> None:
    if min(connections, requests, request_mb) < 1:
        raise typer.BadParameter("--connections, --requests and --request-mb must be at least 1")
    from bench.connections import main as connections_main

    connections_main(connections, requests, request_mb)


@bench_app.command("validation", help="Produce validation: MB/s of the header-and-CRC check "
                                      "beside the full record validation, alone and with the "
                                      "store's append, for uncompressed, lz4 and zstd batches; "
                                      "with --broker also through brokers with a real producer.")
def bench_validation(
    volume_mb: Annotated[int, typer.Option(help="MiB appended per path and round")] = 256,
    rounds: Annotated[int, typer.Option(help="alternating rounds (the ratio is their median)")] = 3,
    broker: Annotated[bool, typer.Option(help="also through two broker subprocesses")] = False,
    broker_volume_mb: Annotated[int, typer.Option(help="MiB produced per broker and round")] = 128,
) -> None:
    if min(volume_mb, rounds, broker_volume_mb) < 1:
        raise typer.BadParameter("--volume-mb, --rounds and --broker-volume-mb must be at least 1")
    from bench.validation import brokers as validation_brokers
    from bench.validation import main as validation_main

    validation_main(volume_mb, rounds)
    if broker:
        validation_brokers(broker_volume_mb, rounds)


def _run(coro) -> None:
    try:
        import uvloop

        uvloop.run(coro)
    except ImportError:
        asyncio.run(coro)


def stop_event_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (call on the running loop)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
