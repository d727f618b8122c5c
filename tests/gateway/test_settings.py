"""Broker settings: Kafka's names parsed into BrokerConfig; listeners by security protocol, and
security that cannot be provided refused at start instead of served in the clear."""
from __future__ import annotations

import subprocess
import sys

import pytest

from commitgate.gateway.settings import load
from commitgate.launcher import free_port


@pytest.mark.parametrize("settings,refusal", [
    (["listeners=SASL_SSL://127.0.0.1:9093"], ("sasl.enabled.mechanisms for listener SASL_SSL: "
                                              "GSSAPI cannot be served")),
    (["listeners=SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms=PLAIN,KERBEROS"], "KERBEROS"),
    (["listeners=FOO://127.0.0.1:9093"], "FOO has no security protocol"),
    (["listeners=CLIENT://:9093", "listener.security.protocol.map=CLIENT:TLS"],
     "protocol among"),
    (["listeners=PLAINTEXT://:9093,SSL://:9093"], "share a port"),
    (["listeners=PLAINTEXT://:9093,plaintext://:9094"], "appears twice"),
    (["listener.name.ssl.ssl.client.auth=required"], "no listener is named SSL"),
    (["listener.name.plaintext.num.partitions=3"], "unknown setting"),
    (["ssl.client.auth=sometimes"], "ssl.client.auth"),
    (["advertised.listeners=SSL://h:1"], "SSL is not among listeners"),
])
def test_listener_settings_that_cannot_be_served_are_refused(settings, refusal):
    with pytest.raises(ValueError, match=refusal):
        load(None, settings)


def test_named_listeners_with_their_protocols_and_own_settings():
    config = load(None, ["listeners=INSIDE://127.0.0.1:9092,OUTSIDE://0.0.0.0:9094",
                         "listener.security.protocol.map=INSIDE:PLAINTEXT,OUTSIDE:SASL_SSL",
                         "advertised.listeners=OUTSIDE://broker.example:9094",
                         "sasl.enabled.mechanisms=SCRAM-SHA-512",
                         "listener.name.outside.ssl.client.auth=requested"])
    assert [(s.name, s.protocol.value, str(s.endpoint)) for s in config.listeners] == \
        [("INSIDE", "PLAINTEXT", "127.0.0.1:9092"), ("OUTSIDE", "SASL_SSL", "0.0.0.0:9094")]
    assert str(config.advertised_endpoint("INSIDE")) == "localhost:9092"
    assert str(config.advertised_endpoint("OUTSIDE")) == "broker.example:9094"
    assert config.security_of("OUTSIDE").ssl_client_auth == "requested"
    assert config.security_of("INSIDE").ssl_client_auth == "none"


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


@pytest.mark.parametrize("settings,named", [
    (["listeners=SSL://127.0.0.1:{port}"], "set ssl.keystore.location"),
    (["listeners=SSL://127.0.0.1:{port}", "ssl.keystore.location=/nonexistent/key.pem"],
     "ssl.keystore.location (listener SSL): cannot read /nonexistent/key.pem"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms=OAUTHBEARER"],
     "set sasl.oauthbearer.jwks.endpoint.url"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms=OAUTHBEARER",
      "sasl.oauthbearer.jwks.endpoint.url=file:///nonexistent/jwks.json"],
     "not a readable JWKS document"),
])
def test_serve_refuses_security_it_cannot_provide_before_touching_the_store(tmp_path, settings,
                                                                             named):
    port = free_port()
    command = [sys.executable, "-m", "commitgate", "serve", "--override",
               f"log.dirs={tmp_path / 'data'}"]
    for setting in settings:
        command += ["--override", setting.format(port=port)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0
    assert named in " ".join(run.stderr.split()), run.stderr
    assert not (tmp_path / "data").exists()  # refused before the store was touched


@pytest.mark.parametrize("order", [("log.retention.ms=1000", "log.retention.hours=5"),
                                   ("log.retention.hours=5", "log.retention.ms=1000")])
def test_log_retention_ms_wins_over_hours_in_any_order(order):
    assert load(None, list(order)).store.log_retention_ms == 1000


def test_log_retention_hours_alone_sets_the_retention():
    assert load(None, ["log.retention.hours=5"]).store.log_retention_ms == 5 * 3_600_000
