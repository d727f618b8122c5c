"""``commitgate user``: SCRAM users in a data directory, offline (as Kafka's storage tool's
``--add-scram``), for the first user of a SASL listener before the broker starts. A running
broker holds the directory: change its users with AlterUserScramCredentials instead."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from commitgate.engine.data_directory import StoreLocked, lock_directory
from commitgate.engine.store_files import StorePaths
from commitgate.gateway.security.config import SCRAM_MECHANISMS
from commitgate.gateway.security.scram_store import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramStore,
)

users_app = typer.Typer(help="SCRAM users of SASL listeners, offline (the broker stopped).",
                        no_args_is_help=True)


@users_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="the user name (the principal User:NAME)")],
    mechanism: Annotated[str, typer.Option(help="SCRAM-SHA-256 or SCRAM-SHA-512; repeat the "
                                                "command for both")] = "SCRAM-SHA-512",
    data_dir: Annotated[Path, typer.Option(help="the broker's log.dirs")] = Path("data"),
    password_file: Annotated[Path | None, typer.Option(
        help="read the password from this file's first line (default: prompt, or stdin's "
             "first line when it is not a terminal)")] = None,
    iterations: Annotated[int, typer.Option(
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS}")] = DEFAULT_ITERATIONS,
) -> None:
    """Add or replace a user's SCRAM credential (salted; the password is not stored)."""
    mechanism = mechanism.upper()
    if mechanism not in SCRAM_MECHANISMS:
        raise typer.BadParameter(f"--mechanism must be one of {list(SCRAM_MECHANISMS)}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise typer.BadParameter(f"--iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    if not name:
        raise typer.BadParameter("the user name must not be empty")
    password = _password(password_file)
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = lock_directory(StorePaths(data_dir))
    except StoreLocked:
        typer.echo(f"{data_dir} is in use by a running broker: change its users with "
                   f"AlterUserScramCredentials (kafka-configs.sh --alter --add-config "
                   f"'{mechanism}=[password=...]' --entity-type users)", err=True)
        raise typer.Exit(1) from None
    try:
        ScramStore(data_dir / "broker").put(name, mechanism, ScramCredential.from_password(
            mechanism, password, iterations))
    finally:
        os.close(lock)
    typer.echo(f"user {name}: {mechanism} credential with {iterations} iterations saved in "
               f"{data_dir}")


def _password(password_file: Path | None) -> str:
    if password_file is not None:
        lines = password_file.read_text().splitlines()
        password = lines[0] if lines else ""
    elif sys.stdin.isatty():
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise typer.BadParameter("the password must not be empty")
    return password
