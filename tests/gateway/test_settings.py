"""Broker settings: Kafka's names parsed into BrokerConfig, and listeners that ask for a
security protocol CommitGate does not serve refused at start instead of served in the clear."""
from __future__ import annotations

import subprocess
import sys

import pytest

from commitgate.gateway.settings import load
from commitgate.launcher import free_port


@pytest.mark.parametrize("listener", ["SSL://127.0.0.1:9093", "SASL_SSL://127.0.0.1:9093",
                                      "SASL_PLAINTEXT://127.0.0.1:9093", "FOO://127.0.0.1:9093"])
def test_security_protocols_other_than_plaintext_are_refused(listener):
    with pytest.raises(ValueError, match="serves PLAINTEXT only"):
        load(None, [f"listeners={listener}"])


@pytest.mark.parametrize("listener", ["PLAINTEXT://127.0.0.1:9093", "plaintext://127.0.0.1:9093",
                                      "127.0.0.1:9093"])
def test_plaintext_listeners_are_taken(listener):
    assert str(load(None, [f"listeners={listener}"]).listener) == "127.0.0.1:9093"


def test_connection_settings_parse():
    config = load(None, ["max.connections=10", "max.connections.per.ip=3",
                         "max.connections.per.ip.overrides=127.0.0.1:5,[::1]:7",
                         "connections.max.idle.ms=1000", "queued.max.request.bytes=-1",
                         "max.broker.partitions=20"])
    assert (config.max_connections, config.max_connections_per_ip) == (10, 3)
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 5, "::1": 7}
    assert (config.connections_max_idle_ms, config.queued_max_request_bytes) == (1000, -1)
    assert config.max_broker_partitions == 20
    with pytest.raises(ValueError, match="host:count"):
        load(None, ["max.connections.per.ip.overrides=127.0.0.1"])


def test_serve_refuses_an_ssl_listener_and_does_not_listen(tmp_path):
    port = free_port()
    run = subprocess.run([sys.executable, "-m", "commitgate", "serve", "--override",
                          f"log.dirs={tmp_path / 'data'}", "--override",
                          f"listeners=SSL://127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0
    assert "PLAINTEXT only" in run.stderr
    assert not (tmp_path / "data").exists()  # refused before the store was touched


@pytest.mark.parametrize("order", [("log.retention.ms=1000", "log.retention.hours=5"),
                                   ("log.retention.hours=5", "log.retention.ms=1000")])
def test_log_retention_ms_wins_over_hours_in_any_order(order):
    assert load(None, list(order)).store.log_retention_ms == 1000


def test_log_retention_hours_alone_sets_the_retention():
    assert load(None, ["log.retention.hours=5"]).store.log_retention_ms == 5 * 3_600_000
