"""The SASL exchange byte by byte (the wire client): what may come before authentication, the
handshake's answers, bare tokens after SaslHandshake v0, garbage and oversized tokens, session
expiry and re-authentication (KIP-368), and 10,000 failed logins against a broker that serves
everybody else meanwhile with its memory bounded."""
from __future__ import annotations

import re
import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest
from scramp import ScramClient

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.security.conftest import (
    USERS,
    SecureBroker,
    add_users,
    distinct_ports,
    secure_overrides,
)

METADATA, SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 3, 17, 18, 36
Handshake = messages.get("SaslHandshakeRequest").cls
Authenticate = messages.get("SaslAuthenticateRequest").cls
Metadata = messages.get("MetadataRequest").cls
ApiVersions = messages.get("ApiVersionsRequest").cls


def _plain(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def _metadata(client: WireClient) -> object:
    return client.request(METADATA, 9, Metadata(topics=[], allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))


def _login_plain(client: WireClient, user: str, password: str, version: int = 2) -> object:
    assert client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN")).error_code == 0
    return client.request(SASL_AUTHENTICATE, version,
                          Authenticate(auth_bytes=_plain(user, password)))


@pytest.fixture
def sasl(secure_broker) -> str:
    return secure_broker.bootstrap("SASL_PLAINTEXT")


def test_api_versions_then_handshake_then_authenticate(sasl):
    with WireClient(sasl) as client:
        versions = client.request(API_VERSIONS, 3, ApiVersions(client_software_name="t",
                                                               client_software_version="1"))
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[SASL_HANDSHAKE] == (0, 1) and served[SASL_AUTHENTICATE] == (0, 2)
        answer = client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="SCRAM-SHA-512"))
        assert answer.error_code == ErrorCode.NONE
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        scram = ScramClient(["SCRAM-SHA-512"], "alice", USERS["alice"][1])
        first = client.request(SASL_AUTHENTICATE, 2, Authenticate(
            auth_bytes=scram.get_client_first().encode()))
        assert first.error_code == ErrorCode.NONE
        scram.set_server_first(bytes(first.auth_bytes).decode())
        final = client.request(SASL_AUTHENTICATE, 2, Authenticate(
            auth_bytes=scram.get_client_final().encode()))
        assert final.error_code == ErrorCode.NONE and final.session_lifetime_ms == 0
        scram.set_server_final(bytes(final.auth_bytes).decode())  # the server proved its keys
        assert _metadata(client).brokers[0].port == int(sasl.rsplit(":", 1)[1])


@pytest.mark.parametrize("api_key,version,request_", [
    (METADATA, 9, Metadata(topics=[], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)),
    (SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=_plain("alice", "alice-secret"))),
])
def test_a_request_before_the_handshake_closes_the_connection(sasl, api_key, version, request_):
    with WireClient(sasl) as client:
        client.send_raw(client.frame(api_key, version, request_))
        assert client.is_closed_by_peer()


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed(sasl):
    with WireClient(sasl) as client:
        answer = client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.is_closed_by_peer()


def test_a_wrong_password_is_answered_with_the_reason_then_closed(sasl):
    with WireClient(sasl) as client:
        answer = _login_plain(client, "alice", "not-hers")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("token", [b"", b"\xff\xfe garbage", b"no-nul-separators",
                                   b"\0alice", b"\0\0\0\0"])
def test_garbage_plain_tokens_fail_cleanly(sasl, token):
    with WireClient(sasl) as client:
        client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN"))
        answer = client.request(SASL_AUTHENTICATE, 1, Authenticate(auth_bytes=token))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert client.is_closed_by_peer()
    with WireClient(sasl) as client:  # others carry on
        assert _login_plain(client, "alice", "alice-secret").error_code == ErrorCode.NONE


@pytest.mark.parametrize("first", [b"garbage", b"n,,n=alice", b"n,,n=alice,r=", b"\x00" * 64,
                                   b"n,,n=alice,r=abc,tokenauth=true"])
def test_garbage_scram_messages_fail_cleanly(sasl, first):
    with WireClient(sasl) as client:
        client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="SCRAM-SHA-256"))
        answer = client.request(SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=first))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert client.is_closed_by_peer()


def test_a_truncated_sasl_frame_closes_only_its_connection(sasl):
    with WireClient(sasl) as client:
        client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN"))
        frame = client.frame(SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=b"\0alice\0x"))
        body = frame[4:-3]  # a whole frame holding a body cut short
        client.send_raw(struct.pack(">i", len(body)) + body)
        assert client.is_closed_by_peer()
    with WireClient(sasl) as client:
        assert _login_plain(client, "alice", "alice-secret").error_code == ErrorCode.NONE


def test_handshake_v0_takes_bare_tokens(sasl):
    with WireClient(sasl) as client:
        answer = client.request(SASL_HANDSHAKE, 0, Handshake(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.NONE
        token = _plain("bob", "bob-secret")
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's empty challenge: authenticated
        assert _metadata(client).brokers


def test_a_bare_token_with_a_wrong_password_closes_the_connection(sasl):
    with WireClient(sasl) as client:
        client.request(SASL_HANDSHAKE, 0, Handshake(mechanism="PLAIN"))
        token = _plain("bob", "wrong")
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.is_closed_by_peer()


def test_a_tls_client_hello_to_a_plaintext_port_and_plaintext_to_a_tls_port(secure_broker):
    hello = bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00"
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        with WireClient(secure_broker.bootstrap(protocol)) as client:
            client.send_raw(hello)
            assert client.is_closed_by_peer()
    for protocol in ("SSL", "SASL_SSL"):
        with WireClient(secure_broker.bootstrap(protocol)) as client:
            client.send_raw(client.frame(API_VERSIONS, 3, ApiVersions(
                client_software_name="t", client_software_version="1")))
            assert client.is_closed_by_peer()
    with WireClient(secure_broker.bootstrap("PLAINTEXT")) as client:
        assert _metadata(client).brokers


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory, pki) -> SecureBroker:
    """Sessions of 1.5 s, failures answered at once, SASL tokens of at most 4 KiB."""
    data = tmp_path_factory.mktemp("reauth") / "data"
    add_users(data, USERS)
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    overrides = secure_overrides(ports, pki, **{"connections.max.reauth.ms": "1500",
                                                "connection.failed.authentication.delay.ms": "0",
                                                "sasl.server.max.receive.size": "4096"})
    with BrokerProcess(data, overrides, port=ports["PLAINTEXT"]) as broker:
        yield SecureBroker(broker, ports)


def test_a_session_expires_unless_the_client_re_authenticates(reauth_broker):
    with WireClient(reauth_broker.bootstrap("SASL_PLAINTEXT")) as client:
        answer = _login_plain(client, "alice", "alice-secret", version=1)
        assert answer.session_lifetime_ms == 1500
        time.sleep(2.0)  # the session is over: re-authenticating is what the client may do
        again = _login_plain(client, "alice", "alice-secret", version=1)
        assert again.error_code == ErrorCode.NONE and again.session_lifetime_ms == 1500
        assert _metadata(client).brokers
    with WireClient(reauth_broker.bootstrap("SASL_PLAINTEXT")) as client:
        _login_plain(client, "alice", "alice-secret", version=1)
        time.sleep(2.0)  # past the session's lifetime: the next request is refused
        client.send_raw(client.frame(METADATA, 9, Metadata(
            topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)))
        assert client.is_closed_by_peer()


def test_re_authentication_cannot_change_the_principal(reauth_broker):
    with WireClient(reauth_broker.bootstrap("SASL_PLAINTEXT")) as client:
        assert _login_plain(client, "alice", "alice-secret").error_code == ErrorCode.NONE
        answer = _login_plain(client, "bob", "bob-secret")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in answer.error_message
        assert client.is_closed_by_peer()


def test_a_token_above_sasl_server_max_receive_size_is_refused(reauth_broker):
    with WireClient(reauth_broker.bootstrap("SASL_PLAINTEXT")) as client:
        client.request(SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN"))
        answer = client.request(SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=b"x" * 5000))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "sasl.server.max.receive.size" in answer.error_message


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_ten_thousand_failed_logins_leave_the_broker_serving(reauth_broker):
    """Pipelined over 50 connections at a time: each answered SASL_AUTHENTICATION_FAILED and
    closed; memory stays bounded, and a good login still works."""
    pid = reauth_broker.process.process.pid
    baseline = _rss_kib(pid)
    frame_client = WireClient.__new__(WireClient)
    frame_client.correlation = 0
    handshake = frame_client.frame(SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN"))
    failed = 0
    host, port = reauth_broker.bootstrap("SASL_PLAINTEXT").rsplit(":", 1)
    for _ in range(200):
        sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(50)]
        for index, sock in enumerate(sockets):
            login = frame_client.frame(SASL_AUTHENTICATE, 2, Authenticate(
                auth_bytes=_plain(f"nobody-{index}", "x")))
            sock.sendall(handshake + login)
        for sock in sockets:
            failed += _authentication_failed(_read_all(sock))
            sock.close()
    assert failed >= 10_000
    assert _rss_kib(pid) - baseline < 64 * 1024  # no per-failure memory kept
    with urllib.request.urlopen(reauth_broker.process.admin_url + "/metrics", timeout=30) as r:
        metrics = r.read().decode()
    counted = re.search(r"^commitgate_sasl_authentication_failures_total (\S+)$", metrics, re.MULTILINE)
    assert counted and float(counted.group(1)) >= 10_000
    with WireClient(reauth_broker.bootstrap("SASL_PLAINTEXT")) as client:
        assert _login_plain(client, "alice", "alice-secret").error_code == ErrorCode.NONE


def _authentication_failed(answers: bytes) -> int:
    """1 when the second answer (SaslAuthenticate v2's) is SASL_AUTHENTICATION_FAILED."""
    (first,) = struct.unpack_from(">i", answers)
    start = 4 + first + 4 + 4 + 1  # its size, correlation id and header's tagged fields
    response, _ = messages.response(SASL_AUTHENTICATE).decode(memoryview(answers), 2, start)
    return int(response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED)


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the broker closes (both answers of one connection)."""
    out = bytearray()
    while chunk := sock.recv(65536):
        out += chunk
    return bytes(out)
