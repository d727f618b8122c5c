"""OAUTHBEARER: JWTs signed by an issuer key made in the test, checked against its JWKS file
(``sasl.oauthbearer.jwks.endpoint.url=file://...``), the expected audience and issuer. Real
clients log in with a good token; an expired one, a wrong audience, an unknown key and a
forged signature are refused with the reason."""
from __future__ import annotations

import asyncio
import json
import time
import uuid

import jwt
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kafka import KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider

from commitgate.compat_tests.wire import WireClient
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from tests.security.conftest import SecureBroker, distinct_ports

ISSUER = "https://issuer.commitgate.test"
AUDIENCE = "commitgate"
TIMEOUT_S = 30
Handshake = messages.get("SaslHandshakeRequest").cls
Authenticate = messages.get("SaslAuthenticateRequest").cls


@pytest.fixture(scope="module")
def issuer_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory, issuer_key) -> SecureBroker:
    folder = tmp_path_factory.mktemp("oauth")
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(issuer_key.public_key()))
    (folder / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig",
                                                            "alg": "RS256"}]}))
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    overrides = {"listeners": listeners, "advertised.listeners": listeners,
                 "sasl.enabled.mechanisms": "OAUTHBEARER",
                 "sasl.oauthbearer.jwks.endpoint.url": f"file://{folder / 'jwks.json'}",
                 "sasl.oauthbearer.expected.audience": AUDIENCE,
                 "sasl.oauthbearer.expected.issuer": ISSUER,
                 "connections.max.reauth.ms": "3600000",
                 "connection.failed.authentication.delay.ms": "0"}
    with BrokerProcess(folder / "data", overrides, port=ports["PLAINTEXT"]) as broker:
        yield SecureBroker(broker, ports)


def token(key, subject: str = "svc-orders", lifetime_s: int = 600, audience: str = AUDIENCE,
          kid: str = "k1") -> str:
    now = int(time.time())
    return jwt.encode({"sub": subject, "iss": ISSUER, "aud": audience, "iat": now,
                       "exp": now + lifetime_s}, key, algorithm="RS256", headers={"kid": kid})


def test_confluent_kafka_produces_with_a_token(oauth_broker, issuer_key):
    errors: list = []
    producer = Producer({"bootstrap.servers": oauth_broker.bootstrap("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "oauth_cb": lambda _: (token(issuer_key), time.time() + 600)})
    producer.produce("oauth-topic", b"v", on_delivery=lambda err, _: errors.append(err))
    producer.flush(TIMEOUT_S)
    assert errors == [None]


class _Tokens(KafkaPythonTokenProvider):
    def __init__(self, key) -> None:
        self.key = key

    def token(self) -> str:
        return token(self.key)


def test_kafka_python_produces_with_a_token(oauth_broker, issuer_key):
    producer = KafkaProducer(bootstrap_servers=oauth_broker.bootstrap("SASL_PLAINTEXT"),
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=_Tokens(issuer_key))
    try:
        assert producer.send("oauth-topic", b"v").get(TIMEOUT_S).offset >= 0
    finally:
        producer.close(TIMEOUT_S)


class _AsyncTokens(AbstractTokenProvider):
    def __init__(self, key) -> None:
        self.key = key

    async def token(self) -> str:
        return token(self.key)


def test_aiokafka_produces_with_a_token(oauth_broker, issuer_key):
    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=oauth_broker.bootstrap("SASL_PLAINTEXT"),
                                    security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER",
                                    sasl_oauth_token_provider=_AsyncTokens(issuer_key))
        await producer.start()
        try:
            return (await producer.send_and_wait("oauth-topic", b"v")).offset
        finally:
            await producer.stop()
    assert asyncio.run(run()) >= 0


def _authenticate(broker: SecureBroker, bearer: str) -> object:
    with WireClient(broker.bootstrap("SASL_PLAINTEXT")) as client:
        assert client.request(17, 1, Handshake(mechanism="OAUTHBEARER")).error_code == 0
        first = b"n,,\x01auth=Bearer " + bearer.encode() + b"\x01\x01"
        return client.request(36, 2, Authenticate(auth_bytes=first))


def test_the_session_lasts_as_long_as_the_token(oauth_broker, issuer_key):
    answer = _authenticate(oauth_broker, token(issuer_key, lifetime_s=120))
    assert answer.error_code == ErrorCode.NONE
    assert 100_000 < answer.session_lifetime_ms <= 120_000  # the token's, below reauth's hour


def _other_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize("make,reason", [
    (lambda key: token(key, lifetime_s=-120), "expired"),
    (lambda key: token(key, audience="someone-else"), "Audience"),
    (lambda key: token(key, kid="k9"), "no key 'k9'"),
    (lambda key: token(_other_key()), "Signature verification failed"),
    (lambda key: "not.a.jwt", "refused"),
    (lambda key: str(uuid.uuid4()), "refused"),
])
def test_bad_tokens_are_refused_with_the_reason(oauth_broker, issuer_key, make, reason):
    answer = _authenticate(oauth_broker, make(issuer_key))
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert reason in answer.error_message


def test_confluent_kafka_reports_an_expired_token(oauth_broker, issuer_key):
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": oauth_broker.bootstrap("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "oauth_cb": lambda _: (token(issuer_key, lifetime_s=-120),
                                                time.time() + 600),
                         "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and \
            time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION and "expired" in e.str() for e in errors)


def test_the_issuers_public_key_in_pem_instead_of_a_jwks(tmp_path, issuer_key):
    pem = issuer_key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "issuer.pem").write_bytes(pem)
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    overrides = {"listeners": listeners, "advertised.listeners": listeners,
                 "sasl.enabled.mechanisms": "OAUTHBEARER",
                 "sasl.oauthbearer.jwks.endpoint.url": f"file://{tmp_path / 'issuer.pem'}",
                 "connection.failed.authentication.delay.ms": "0"}
    with BrokerProcess(tmp_path / "data", overrides, port=ports["PLAINTEXT"]) as process:
        broker = SecureBroker(process, ports)
        assert _authenticate(broker, token(issuer_key, kid="any")).error_code == ErrorCode.NONE
        forged = _authenticate(broker, token(_other_key()))
        assert forged.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
