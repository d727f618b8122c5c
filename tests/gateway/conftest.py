"""A real CommitGate broker subprocess on a free port, one per test module by default."""
from __future__ import annotations

import pytest

from commitgate.launcher import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    root = tmp_path_factory.mktemp("broker")
    process = BrokerProcess(root / "data", {"num.partitions": "1"})
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"


@pytest.fixture
def fresh_broker(tmp_path) -> BrokerProcess:
    """A broker of the test's own, for tests that restart or kill it."""
    process = BrokerProcess(tmp_path / "data")
    process.start()
    yield process
    process.kill()
