"""The image's HEALTHCHECK script (docker/healthcheck.py) run on this machine against a broker
process: it finds the broker by the COMMITGATE_* variables the broker is configured with."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commitgate.launcher import BrokerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "healthcheck.py"


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> BrokerProcess:
    process = BrokerProcess(tmp_path_factory.mktemp("healthcheck") / "data").start()
    yield process
    assert process.stop() == 0, process.log_tail()


def _healthcheck(**variables: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMMITGATE_")}
    # the project from this checkout, as the image's venv has it beside the script
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env={**environ, **variables}, timeout=60, check=False)


def test_ready_through_the_admin_readyz(broker: BrokerProcess) -> None:
    # a wildcard address is asked on loopback, as inside the container
    admin = broker.admin_url.replace("127.0.0.1", "0.0.0.0")
    done = _healthcheck(COMMITGATE_ADMIN_LISTENERS=admin,
                        COMMITGATE_ADMIN_AUTHENTICATION="none")  # as the image sets it
    assert (done.returncode, done.stdout.strip()) == (0, "ready"), done.stderr


def test_with_the_admin_api_off_the_kafka_listener_is_tried(broker: BrokerProcess) -> None:
    done = _healthcheck(COMMITGATE_ADMIN_LISTENERS="", COMMITGATE_LISTENERS=broker.bootstrap)
    assert (done.returncode, done.stdout.strip()) == (0, "ready"), done.stderr
    nobody = f"127.0.0.1:{free_port()}"
    done = _healthcheck(COMMITGATE_ADMIN_LISTENERS="", COMMITGATE_LISTENERS=nobody)
    assert done.returncode == 1 and "not answering" in done.stdout, done.stdout + done.stderr


def test_an_admin_listener_that_does_not_answer_is_unhealthy() -> None:
    done = _healthcheck(COMMITGATE_ADMIN_LISTENERS=f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1 and "not answering" in done.stdout, done.stdout + done.stderr
