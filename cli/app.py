"""The ``commitgate`` command: the broker (serve, selfcheck) and the sub-apps of the other
modules of this package."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from commitgate.cli.bench import bench_app
from commitgate.cli.compat import COMPAT_HELP, FUZZ_HELP, compat, fuzz
from commitgate.cli.groups import groups_app
from commitgate.cli.pipeline import pipeline_app
from commitgate.cli.query import query
from commitgate.cli.records import consume, produce
from commitgate.cli.store import store_app
from commitgate.cli.topic import topic_app
from commitgate.cli.users import users_app
from commitgate.gateway import settings
from commitgate.gateway.env_settings import environment_settings
from commitgate.gateway.server import configure_logging, run_loop

app = typer.Typer(help="CommitGate: a Kafka-compatible broker over a RocketMQ-style store.",
                  no_args_is_help=True, add_completion=False)
app.add_typer(bench_app, name="bench")
app.add_typer(groups_app, name="groups", hidden=True)  # the name before "group"
app.add_typer(groups_app, name="group")
app.add_typer(topic_app, name="topic")
app.command(help="Produce records: lines of stdin or --value (like kcat -P).")(produce)
app.command(help="Consume records, following new ones until -n or Ctrl-C (like kcat -C).")(
    consume)
app.command(help="Find records by key (through CommitGate's IndexFiles), offset or time, on "
                 "the broker's admin API.")(query)
app.add_typer(store_app, name="store")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(users_app, name="user")
@app.command(help="Start CommitGate on the store in log.dirs (default ./data).\n\n"
                  "Settings (as --override KEY=VALUE, lines of --config FILE or environment "
                  "variables COMMITGATE_KEY_IN_CAPITALS, dots as underscores; --override wins "
                  "over the file, the file over the environment):\n\n"
                  + settings.describe().replace("\n", "\n\n"))
def serve(
    config: Annotated[Path | None, typer.Option(help="a Kafka-style .properties file")] = None,
    override: Annotated[list[str], typer.Option(help="KEY=VALUE, may repeat")] = [],  # noqa: B006
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    configure_logging(log_level)
    try:
        broker_config = settings.load(config, override, environment_settings(os.environ))
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from None
    from commitgate.engine import StoreLocked, VolumeTooSmall
    from commitgate.gateway.security.tls import SecurityError
    from commitgate.gateway.server import run_until_signal

    try:
        run_loop(run_until_signal(broker_config))
    except (OSError, StoreLocked, VolumeTooSmall, SecurityError) as exc:  # port taken, data
        # directory in use, unwritable or on too small a filesystem; a key file missing
        logging.getLogger("commitgate").error("CommitGate cannot start: %s", exc)
        raise typer.Exit(1) from None


@app.command(help="Append, read back, restart and verify a store in a temporary directory.")
def selfcheck(log_level: str = "warning") -> None:
    configure_logging(log_level)
    from commitgate.gateway.selfcheck import run_selfcheck

    run_loop(run_selfcheck())


app.command(help=COMPAT_HELP)(compat)
app.command(help=FUZZ_HELP)(fuzz)
