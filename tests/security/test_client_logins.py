"""Real clients (confluent-kafka, kafka-python, aiokafka) against one broker serving PLAINTEXT,
SSL, SASL_PLAINTEXT and SASL_SSL at once: each SASL mechanism over both SASL protocols, TLS with
and without a client certificate; wrong passwords, unknown users and untrusted certificates are
refused with the client's authentication error while the others carry on."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from tests.security.clients import CLIENTS, Login, confluent_settings, round_trip
from tests.security.conftest import USERS

ERROR_TIMEOUT_S = 30
MECHANISM_USERS = {"PLAIN": "alice", "SCRAM-SHA-256": "bob", "SCRAM-SHA-512": "alice"}


def _login(protocol: str, mechanism: str | None, pki, user: str = "",
           password: str = "") -> Login:
    tls = protocol in ("SSL", "SASL_SSL")
    return Login(protocol, mechanism, user, password, pki.ca_file if tls else None)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", sorted(MECHANISM_USERS))
def test_sasl_mechanisms_round_trip(secure_broker, pki, client, protocol, mechanism):
    user = MECHANISM_USERS[mechanism]
    login = _login(protocol, mechanism, pki, user, USERS[user][1])
    got = round_trip(client, secure_broker.bootstrap(protocol), login)
    assert len(got) == 2 and got[0].startswith(b"first ")


@pytest.mark.parametrize("client", CLIENTS)
def test_tls_round_trip_without_and_with_a_client_certificate(secure_broker, pki, client):
    plain_tls = _login("SSL", None, pki)
    assert len(round_trip(client, secure_broker.bootstrap("SSL"), plain_tls)) == 2
    mutual = Login("SSL", None, ca_file=pki.ca_file, cert_file=pki.client_cert,
                   key_file=pki.client_key)
    assert len(round_trip(client, secure_broker.bootstrap("SSL"), mutual)) == 2


def _metadata_error(bootstrap: str, login: Login) -> KafkaError:
    """The first error librdkafka reports (error_cb) while trying to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**confluent_settings(bootstrap, login),
                         "error_cb": errors.append, "reconnect.backoff.max.ms": 1000})
    deadline = time.monotonic() + ERROR_TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, f"no error from {bootstrap} within {ERROR_TIMEOUT_S} s"
    return errors[0]


@pytest.mark.parametrize("mechanism,user,password", [
    ("SCRAM-SHA-512", "alice", "wrong"), ("SCRAM-SHA-256", "nobody", "x"),
    ("PLAIN", "alice", "wrong"), ("PLAIN", "nobody", "x"),
    ("SCRAM-SHA-256", "alice", "alice-secret"),  # alice has a SHA-512 credential only
])
def test_bad_credentials_are_refused_while_others_carry_on(secure_broker, pki, mechanism, user,
                                                           password):
    bootstrap = secure_broker.bootstrap("SASL_PLAINTEXT")
    error = _metadata_error(bootstrap, _login("SASL_PLAINTEXT", mechanism, pki, user, password))
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "Authentication failed" in error.str()
    good = _login("SASL_PLAINTEXT", "SCRAM-SHA-512", pki, "alice", "alice-secret")
    assert len(round_trip("confluent-kafka", bootstrap, good)) == 2


def test_an_untrusted_client_certificate_is_refused(secure_broker, pki):
    stranger = Login("SSL", None, ca_file=pki.ca_file, cert_file=pki.stranger_cert,
                     key_file=pki.stranger_key)
    error = _metadata_error(secure_broker.bootstrap("SSL"), stranger)
    assert error.code() in (KafkaError._TRANSPORT, KafkaError._SSL, KafkaError._TIMED_OUT,
                            KafkaError._ALL_BROKERS_DOWN), error
    assert len(round_trip("kafka-python", secure_broker.bootstrap("SSL"),
                          _login("SSL", None, pki))) == 2


def test_a_client_that_does_not_trust_the_broker_fails_its_handshake(secure_broker, pki):
    error = _metadata_error(secure_broker.bootstrap("SASL_SSL"),
                            Login("SASL_SSL", "PLAIN", "alice", "alice-secret"))
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                            KafkaError._ALL_BROKERS_DOWN), error
