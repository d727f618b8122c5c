"""A real CommitGate broker subprocess on a free port, one per test module by default, and a
wire-level client of the test's own to it."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess

# a request's answer on a loaded machine; a hang still fails the test, after this long
WIRE_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    root = tmp_path_factory.mktemp("broker")
    process = BrokerProcess(root / "data", {"num.partitions": "1"})
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"


@pytest.fixture
def client(broker) -> Iterator[WireClient]:
    """A WireClient connection of the test's own to the module's ``broker`` (a module whose
    broker is set up otherwise overrides ``broker``), closed after the test: what a test leaves
    on its connection (a request cut short, a connection the broker closed) stays with it."""
    with WireClient(broker.bootstrap, timeout_s=WIRE_TIMEOUT_S) as wire:
        yield wire


@pytest.fixture
def fresh_broker(tmp_path) -> BrokerProcess:
    """A broker of the test's own, for tests that restart or kill it."""
    process = BrokerProcess(tmp_path / "data")
    process.start()
    yield process
    process.kill()
