"""A real broker subprocess per module, as tests/gateway's ``broker`` (whose ``fresh_broker``
is here too), whose consumer groups start at once: an empty group's first join would wait
``group.initial.rebalance.delay.ms`` (3 s by default) for more members, and these tests join
one consumer at a time, several times a test."""
import pytest

from commitgate.launcher import BrokerProcess
from tests.gateway.conftest import fresh_broker  # noqa: F401


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    root = tmp_path_factory.mktemp("broker")
    process = BrokerProcess(root / "data", {"num.partitions": "1",
                                            "group.initial.rebalance.delay.ms": "0"})
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"
