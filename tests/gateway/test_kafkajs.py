"""kafkajs 2.2 (Node) against a real CommitGate.

tests/clients/node/driver.js runs every scenario in one Node process and prints one JSON line
each (see client_contract.py). Its npm packages come from the committed package-lock.json:
``npm ci`` runs once into tests/clients/node/node_modules and is skipped while the lock file is
unchanged. kafkajs is not idempotent by default; the ``idempotent`` scenario asks for it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.gateway.client_contract import *  # the shared client tests
from tests.gateway.client_contract import (
    ClientTraits,
    java_partition,
    require_runtime,
    run_driver,
    run_tool,
)

NODE_DIR = Path(__file__).parent.parent / "clients" / "node"
STAMP = NODE_DIR / "node_modules" / ".commitgate-lock-sha256"
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def node_driver() -> list[str]:
    """The command that runs the driver, after ``npm ci`` if the lock file changed."""
    node, npm = require_runtime("node"), require_runtime("npm")
    lock = hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text() != lock:
        run_tool([npm, "ci", "--no-audit", "--no-fund"], INSTALL_TIMEOUT_S, cwd=NODE_DIR)
        STAMP.write_text(lock)
    return [node, str(NODE_DIR / "driver.js")]


@pytest.fixture(scope="module")
def reports(broker, node_driver) -> dict:
    return run_driver([*node_driver, broker.bootstrap, "kafkajs"], RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def traits() -> ClientTraits:
    return ClientTraits(partition_of=java_partition, idempotent_by_default=False,
                        too_large_error="MESSAGE_TOO_LARGE", missing_time_is_end=True,
                        reports_timestamps=False)
