"""TLS listeners from each kind of keystore (PEM file, PEM text, PKCS12), TLS versions, and
client certificates refused for having expired; the principal mapped from a client
certificate's subject is the one quotas and ACLs see."""
from __future__ import annotations

import datetime
import socket
import ssl

import pytest
import trustme
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from commitgate.launcher import BrokerProcess
from tests.security.clients import Login, confluent_settings, round_trip
from tests.security.conftest import distinct_ports

TIMEOUT_S = 30


def _ssl_broker(tmp_path, **settings: str) -> tuple[BrokerProcess, str]:
    ports = distinct_ports(["PLAINTEXT", "SSL"])
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker = BrokerProcess(tmp_path / "data", {"listeners": listeners,
                                               "advertised.listeners": listeners, **settings},
                           port=ports["PLAINTEXT"])
    return broker, f"127.0.0.1:{ports['SSL']}"


def _handshake(address: str, ca_file, **context_settings) -> str:
    """The TLS version a Python client negotiates with the listener."""
    context = ssl.create_default_context(cafile=str(ca_file))
    for name, value in context_settings.items():
        setattr(context, name, value)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        return tls.version()


def test_pem_text_instead_of_a_keystore_file(tmp_path, pki):
    text = pki.server_pem.read_text()
    first_certificate = text.index("-----BEGIN CERTIFICATE-----")
    key, chain = text[:first_certificate].strip(), text[first_certificate:].strip()
    broker, address = _ssl_broker(tmp_path, **{"ssl.keystore.key": key,
                                                "ssl.keystore.certificate.chain": chain})
    with broker:
        assert len(round_trip("confluent-kafka", address, Login("SSL", ca_file=pki.ca_file))) == 2


def test_a_pkcs12_keystore_with_its_password(tmp_path, pki):
    text = pki.server_pem.read_bytes()
    key = serialization.load_pem_private_key(text, None)
    certs = x509.load_pem_x509_certificates(text)
    (tmp_path / "server.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, certs[0], certs[1:],
        serialization.BestAvailableEncryption(b"store-secret")))
    broker, address = _ssl_broker(tmp_path, **{
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "server.p12"),
        "ssl.keystore.password": "store-secret"})
    with broker:
        assert len(round_trip("kafka-python", address, Login("SSL", ca_file=pki.ca_file))) == 2


def test_a_wrong_pkcs12_password_refuses_the_start(tmp_path, pki):
    key = serialization.load_pem_private_key(pki.server_pem.read_bytes(), None)
    cert = x509.load_pem_x509_certificates(pki.server_pem.read_bytes())[0]
    (tmp_path / "server.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, None, serialization.BestAvailableEncryption(b"right")))
    broker, _ = _ssl_broker(tmp_path, **{
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tmp_path / "server.p12"),
        "ssl.keystore.password": "wrong"})
    with pytest.raises(RuntimeError, match="not a PKCS12 keystore this password opens"):
        broker.start()


def test_ssl_enabled_protocols_limits_the_versions(tmp_path, pki):
    broker, address = _ssl_broker(tmp_path, **{"ssl.keystore.location": str(pki.server_pem),
                                               "ssl.enabled.protocols": "TLSv1.3"})
    with broker:
        assert _handshake(address, pki.ca_file) == "TLSv1.3"
        with pytest.raises(ssl.SSLError):
            _handshake(address, pki.ca_file, maximum_version=ssl.TLSVersion.TLSv1_2)


def test_an_expired_client_certificate_is_refused(tmp_path, pki):
    ca = trustme.CA()  # its own CA: the broker trusts it, the certificate is out of date
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)
    old = ca.issue_cert("old.clients.test", common_name="old", not_before=past -
                        datetime.timedelta(days=30), not_after=past)
    old.cert_chain_pems[0].write_to_path(str(tmp_path / "old.crt"))
    old.private_key_pem.write_to_path(str(tmp_path / "old.key"))
    broker, address = _ssl_broker(tmp_path, **{"ssl.keystore.location": str(pki.server_pem),
                                               "ssl.truststore.location": str(tmp_path / "ca.pem"),
                                               "ssl.client.auth": "required"})
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(tmp_path / "old.crt"), str(tmp_path / "old.key"))
    host, port = address.rsplit(":", 1)
    with broker, socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
        tls.sendall(b"\0\0\0\0")  # TLS 1.3 reports the refusal on the first read
        assert _refused(tls)


def _refused(tls: ssl.SSLSocket) -> bool:
    """The broker ended the connection (an alert, a reset or a close) instead of answering."""
    try:
        return tls.recv(1) == b""
    except (ssl.SSLError, ConnectionResetError):
        return True


def test_a_client_certificates_mapped_principal_is_what_acls_see(tmp_path, pki):
    broker, address = _ssl_broker(tmp_path, **{
        "ssl.keystore.location": str(pki.server_pem),
        "ssl.truststore.location": str(pki.ca_file), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": r"RULE:^CN=([^,]+),OU=apps,.*$/$1/L,DEFAULT",
        "authorizer.class.name": "on", "super.users": "User:ANONYMOUS"})
    alice = Login("SSL", ca_file=pki.ca_file, cert_file=pki.client_cert, key_file=pki.client_key)
    with broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # PLAINTEXT: the super user
        for future in admin.create_acls([AclBinding(
                ResourceType.TOPIC, "sec-", ResourcePatternType.PREFIXED, "User:alice", "*",
                AclOperation.ALL, AclPermissionType.ALLOW), AclBinding(
                ResourceType.GROUP, "sec-", ResourcePatternType.PREFIXED, "User:alice", "*",
                AclOperation.READ, AclPermissionType.ALLOW)]).values():
            future.result(TIMEOUT_S)
        assert len(round_trip("confluent-kafka", address, alice)) == 2  # topics sec-...
        producer = Producer(confluent_settings(address, alice))
        errors: list = []
        producer.produce("not-hers", b"v", on_delivery=lambda err, _: errors.append(err))
        producer.flush(TIMEOUT_S)
        assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_clients_that_never_finish_their_handshake_hold_nobody_up(tmp_path, pki):
    broker, address = _ssl_broker(tmp_path, **{"ssl.keystore.location": str(pki.server_pem)})
    host, port = address.rsplit(":", 1)
    with broker:
        silent = [socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
                  for _ in range(50)]  # TCP only: no ClientHello
        try:
            assert _handshake(address, pki.ca_file) == "TLSv1.3"
            assert len(round_trip("kafka-python", address, Login("SSL", ca_file=pki.ca_file))) == 2
        finally:
            for sock in silent:
                sock.close()
