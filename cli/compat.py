"""``commitgate compat`` and ``commitgate fuzz``: the compatibility matrix and the fuzzer of
compat_tests/, pointed at a broker."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

COMPAT_HELP = ("The compatibility matrix: every scenario with every client (kafka-python, "
               "aiokafka, confluent-kafka, the Java client 3.9 and 4.3, kafkajs, kcat), against a "
               "fresh CommitGate on a free port or the broker at --bootstrap. Writes compat.json, "
               "compat.md and compat.html; with --reference, also the cells whose verdict "
               "differs from that run's.")


def compat(
    bootstrap: Annotated[str | None, typer.Option(help="HOST:PORT of a running broker")] = None,
    out: Annotated[Path, typer.Option(help="where the reports go")] = Path("compat-results"),
    clients: Annotated[list[str] | None, typer.Option(help="client names, may repeat")] = None,
    scenarios: Annotated[list[str] | None, typer.Option(help="scenario names, may repeat")] = None,
    reference: Annotated[Path | None, typer.Option(
        help="compat.json of a reference run (e.g. Apache Kafka): list the cells whose verdict "
             "differs from it")] = None,
) -> None:
    from commitgate.compat_tests.cli import run as run_compat

    try:
        run_compat(bootstrap, out, clients or None, scenarios or None, reference)
    except ValueError as exc:  # an unknown client or scenario name, an unreadable reference
        raise typer.BadParameter(str(exc)) from None


FUZZ_HELP = ("Fuzz a broker with requests built from Kafka's message schemas (every API it "
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
    from commitgate.compat_tests.fuzz import BrokerDown, FuzzOptions, api_keys
    from commitgate.compat_tests.fuzz import main as fuzz_main

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
