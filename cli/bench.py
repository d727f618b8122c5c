"""``commitgate bench ...``: the benchmarks of bench/ (figures, not tests)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

bench_app = typer.Typer(help="Benchmarks (figures, not tests).", no_args_is_help=True)


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
    from commitgate.bench.store import main as bench_main

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
    from commitgate.bench.lifecycle import main as lifecycle_main

    lifecycle_main(data_dir, volume_mb, segment_mb, rounds, minutes)


@bench_app.command("codec", help="Protocol codecs: Produce decode and Fetch encode, "
                                 "CommitGate vs kio (if installed) vs kafka-python.")
def bench_codec(
    rounds: Annotated[int, typer.Option(help="times each measurement runs (best is shown)")] = 3,
) -> None:
    from commitgate.bench.codec import main as codec_main

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
    from commitgate.bench.broker import main as brokers_main
    from commitgate.bench.profiles import PROFILES
    from commitgate.bench.targets import by_address

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
    from commitgate.bench.connections import main as connections_main

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
    from commitgate.bench.validation import brokers as validation_brokers
    from commitgate.bench.validation import main as validation_main

    validation_main(volume_mb, rounds)
    if broker:
        validation_brokers(broker_volume_mb, rounds)


@bench_app.command("pipeline", help="The Spark pipeline: batch read MB/s of a topic through the "
                                    "commitgate source (local[2]) beside one confluent-kafka "
                                    "consumer process reading the same bytes, and the demo's "
                                    "micro-batch end-to-end latency at a given click rate.")
def bench_pipeline(
    size_mib: Annotated[int, typer.Option(help="MiB of 1 KiB records in the topic read")] = 1024,
    rounds: Annotated[int, typer.Option(help="alternating rounds of each reader")] = 3,
    bootstrap: Annotated[str | None, typer.Option(
        help="HOST:PORT of a running broker (default: start a CommitGate)")] = None,
    rate: Annotated[float, typer.Option(help="the demo's clicks per second")] = 10_000,
    latency_seconds: Annotated[float, typer.Option(
        help="measured seconds of the demo after its warm-up; 0 skips it")] = 30.0,
    warmup_seconds: Annotated[float, typer.Option(
        help="the demo's first seconds, not measured (its first micro-batches warm up)")] = 15.0,
) -> None:
    if min(size_mib, rounds) < 1 or rate <= 0 or min(latency_seconds, warmup_seconds) < 0:
        raise typer.BadParameter("--size-mib and --rounds must be at least 1, --rate positive, "
                                 "--latency-seconds and --warmup-seconds not negative")
    from commitgate.bench.pipeline import Settings
    from commitgate.bench.pipeline import main as pipeline_main

    pipeline_main(Settings(size_mib=size_mib, rounds=rounds, bootstrap=bootstrap, rate=rate,
                           latency_s=latency_seconds, warmup_s=warmup_seconds))


def _passthrough(name: str, module: str, summary: str) -> None:
    """A benchmark with its own argparse options (``python -m commitgate.bench.<module>``), under
    ``commitgate bench``: its arguments and --help are its own."""
    @bench_app.command(name, add_help_option=False, help=summary + " (--help lists its options)",
                       context_settings={"allow_extra_args": True,
                                         "ignore_unknown_options": True})
    def run(ctx: typer.Context) -> None:
        import importlib

        importlib.import_module(f"commitgate.bench.{module}").main(ctx.args)


_passthrough("udp", "udp", "UDP ingest: datagrams/s accepted with no loss, CPU per datagram, "
                           "a Kafka client's latency meanwhile")
_passthrough("admin", "admin", "Produce and fetch MB/s with the admin listener scraped against "
                               "off, alternating rounds")
_passthrough("security", "security", "Produce and fetch MB/s over SASL_SSL (SCRAM-SHA-512) "
             "beside PLAINTEXT on one broker, and client set-ups per second")
_passthrough("query", "query", "Query by key among millions of records through /v1/query")
