"""The Java client (3.9 and 4.3), kafkajs, @platformatic/kafka and kcat over SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with
PLAIN and mutual TLS, through their compatibility-matrix drivers given the listener's security in
their own terms (COMMITGATE_COMPAT_CLIENT_SETTINGS); a wrong password fails with the client's
authentication error instead of hanging. A missing runtime fails, as in the matrix
(COMMITGATE_ALLOW_MISSING_CLIENTS=1 skips locally)."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import serialization

from commitgate.compat_tests.clients import CLIENTS, Unavailable
from commitgate.compat_tests.contract import (
    DriverError,
    DriverGone,
    DriverProcess,
    Record,
    records_json,
)
from tests.security.conftest import USERS

ALLOW_MISSING = "COMMITGATE_ALLOW_MISSING_CLIENTS"
TIMEOUT_S = 60
MODES = {"SASL_SSL": ("SCRAM-SHA-512", "alice"), "SASL_PLAINTEXT": ("PLAIN", "bob"),
         "SSL": (None, None)}


def _java_settings(folder: Path, protocol: str, pki, password: str | None = None) -> Path:
    mechanism, user = MODES[protocol]
    lines = [f"security.protocol={protocol}"]
    if protocol in ("SSL", "SASL_SSL"):
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca_file}"]
    if protocol == "SSL":  # Java's PEM keystores take PKCS#8 keys
        key = serialization.load_pem_private_key(pki.client_key.read_bytes(), None)
        keystore = folder / "alice-keystore.pem"
        keystore.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()) + pki.client_cert.read_bytes())
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"]
    if mechanism:
        module = {"PLAIN": "plain.PlainLoginModule",
                  "SCRAM-SHA-512": "scram.ScramLoginModule"}[mechanism]
        secret = password or USERS[user][1]
        jaas = (f"org.apache.kafka.common.security.{module} required "
                f'username="{user}" password="{secret}";')
        lines += [f"sasl.mechanism={mechanism}", f"sasl.jaas.config={jaas}"]
    path = folder / f"java-{protocol}.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def _node_settings(tls_key: str, mechanism_name) -> object:
    """kafkajs and @platformatic/kafka: node's TLS options under ``tls_key``, and ``sasl``."""
    def build(folder: Path, protocol: str, pki, password: str | None = None) -> Path:
        mechanism, user = MODES[protocol]
        settings: dict = {}
        if protocol in ("SSL", "SASL_SSL"):
            settings[tls_key] = {"ca": [pki.ca_file.read_text()]}
        if protocol == "SSL":
            settings[tls_key].update(cert=pki.client_cert.read_text(),
                                     key=pki.client_key.read_text())
        if mechanism:
            settings["sasl"] = {"mechanism": mechanism_name(mechanism), "username": user,
                                "password": password or USERS[user][1]}
        path = folder / f"node-{tls_key}-{protocol}.json"
        path.write_text(json.dumps(settings))
        return path
    return build


def _kcat_settings(folder: Path, protocol: str, pki, password: str | None = None) -> Path:
    mechanism, user = MODES[protocol]
    lines = [f"security.protocol={protocol.lower()}"]
    if protocol in ("SSL", "SASL_SSL"):
        lines.append(f"ssl.ca.location={pki.ca_file}")
    if protocol == "SSL":
        lines += [f"ssl.certificate.location={pki.client_cert}",
                  f"ssl.key.location={pki.client_key}"]
    if mechanism:
        lines += [f"sasl.mechanism={mechanism}", f"sasl.username={user}",
                  f"sasl.password={password or USERS[user][1]}"]
    path = folder / f"kcat-{protocol}.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


SETTINGS = {"java-3.9": _java_settings, "java-4.3": _java_settings,
            "kafkajs": _node_settings("ssl", str.lower),
            "platformatic": _node_settings("tls", str),
            "kcat": _kcat_settings}


@pytest.fixture(scope="module")
def commands(tmp_path_factory) -> dict:
    """Each client's driver command (compiled or installed once)."""
    prepared = {}
    for spec in CLIENTS:
        if spec.name in SETTINGS:
            try:
                prepared[spec.name] = spec.prepare(tmp_path_factory.mktemp(spec.name))
            except Unavailable as exc:
                prepared[spec.name] = exc
    return prepared


def _driver(commands: dict, client: str, bootstrap: str, settings: Path) -> DriverProcess:
    command = commands[client]
    if isinstance(command, Unavailable):
        if os.environ.get(ALLOW_MISSING) == "1":
            pytest.skip(f"{client}: {command} ({ALLOW_MISSING}=1)")
        pytest.fail(f"{client}: {command}: every client must run in CI")
    driver = DriverProcess(command(bootstrap),
                           env={"COMMITGATE_COMPAT_CLIENT_SETTINGS": str(settings)}).start()
    driver.call("hello", TIMEOUT_S)
    return driver


def _topic(secure_broker, client: str) -> str:
    name = f"sec-{client}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1)]).values():
        future.result(TIMEOUT_S)
    return name


@pytest.mark.parametrize("client", sorted(SETTINGS))
@pytest.mark.parametrize("protocol", sorted(MODES))
def test_produce_and_read_back(secure_broker, pki, commands, tmp_path, client, protocol):
    settings = SETTINGS[client](tmp_path, protocol, pki)
    driver = _driver(commands, client, secure_broker.bootstrap(protocol), settings)
    try:
        topic = _topic(secure_broker, client)
        records = [Record(b"k%d" % i, b"v%d" % i) for i in range(3)]
        sent = driver.call("produce", TIMEOUT_S, topic=topic, records=records_json(records),
                           config={})["sent"]
        assert [s["offset"] for s in sent] == [0, 1, 2]
        driver.call("consumer_open", TIMEOUT_S, name="r", topic=topic, partitions=[0],
                    group=None, start="earliest", read_committed=False)
        got = driver.call("poll", TIMEOUT_S, name="r", count=3, max_ms=30_000)["records"]
        assert [Record.from_json(r).value for r in got] == [b"v0", b"v1", b"v2"]
        driver.call("consumer_close", TIMEOUT_S, name="r")
    finally:
        driver.stop()


@pytest.mark.parametrize("client", sorted(SETTINGS))
def test_a_wrong_password_is_an_error_not_a_hang(secure_broker, pki, commands, tmp_path,
                                                 client):
    """The client reports the broker's authentication failure (kafkajs's driver connects its
    admin client at start and exits with it)."""
    settings = SETTINGS[client](tmp_path, "SASL_SSL", pki, password="wrong")
    command = commands[client]
    if isinstance(command, Unavailable):
        pytest.skip(str(command)) if os.environ.get(ALLOW_MISSING) == "1" else \
            pytest.fail(f"{client}: {command}")
    driver = DriverProcess(command(secure_broker.bootstrap("SASL_SSL")),
                           env={"COMMITGATE_COMPAT_CLIENT_SETTINGS": str(settings)}).start()
    try:
        with pytest.raises((DriverError, DriverGone)) as failure:
            driver.call("hello", TIMEOUT_S)
            driver.call("produce", TIMEOUT_S, topic=_topic(secure_broker, client),
                        records=records_json([Record(None, b"v")]), config={})
        said = f"{failure.value} {' '.join(driver.stderr_tail)}"
        # @platformatic/kafka reports it as "Cannot connect to any broker", raised from its SASL
        # authentication step (its trace names it); the others quote the broker's message
        assert "authentication failed" in said.lower() or "onSaslAuthenticate" in said, said
    finally:
        driver.stop()
