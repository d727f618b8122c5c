"""SCRAM users through the admin APIs (DescribeUserScramCredentials, AlterUserScramCredentials)
with confluent-kafka's AdminClient and the Java admin's error codes, durable across a restart and
a SIGKILL; a user added through the API logs in, a deleted one no longer does; and the offline
``commitgate user add`` for the first user."""
from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
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

TIMEOUT_S = 30


@pytest.fixture
def broker(tmp_path, pki):
    data = tmp_path / "data"
    add_users(data, USERS)
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    with BrokerProcess(data, secure_overrides(ports, pki), port=ports["PLAINTEXT"]) as process:
        yield SecureBroker(process, ports)


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})


def _described(admin: AdminClient, users=None) -> dict:
    futures = admin.describe_user_scram_credentials(users)
    if users is None:
        return {user: {(i.mechanism, i.iterations) for i in described.scram_credential_infos}
                for user, described in futures.result(TIMEOUT_S).items()}
    return {user: {(i.mechanism, i.iterations) for i in f.result(TIMEOUT_S)
                   .scram_credential_infos} for user, f in futures.items()}


def _logs_in(broker, user: str, password: str, mechanism: str) -> bool:
    """One SASL exchange over the wire (PLAIN, or SCRAM with scramp's client)."""
    Handshake = messages.get("SaslHandshakeRequest").cls
    Authenticate = messages.get("SaslAuthenticateRequest").cls
    with WireClient(broker.bootstrap("SASL_PLAINTEXT")) as client:
        assert client.request(17, 1, Handshake(mechanism=mechanism)).error_code == 0
        if mechanism == "PLAIN":
            token = b"\0" + user.encode() + b"\0" + password.encode()
            return client.request(36, 2, Authenticate(auth_bytes=token)).error_code == 0
        scram = ScramClient([mechanism], user, password)
        first = client.request(36, 2, Authenticate(auth_bytes=scram.get_client_first().encode()))
        if first.error_code:
            return False
        scram.set_server_first(bytes(first.auth_bytes).decode())
        final = client.request(36, 2, Authenticate(auth_bytes=scram.get_client_final().encode()))
        return final.error_code == 0


def test_describe_shows_mechanisms_and_iterations_never_keys(broker):
    described = _described(_admin(broker))
    assert described == {"alice": {(ScramMechanism.SCRAM_SHA_512, 4096)},
                         "bob": {(ScramMechanism.SCRAM_SHA_256, 4096)}}
    with pytest.raises(KafkaException) as missing:
        _described(_admin(broker), ["nobody"])
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_an_added_user_logs_in_across_restart_and_sigkill_and_a_deleted_one_does_not(broker):
    admin = _admin(broker)
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(
        ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret", b"some-salt-of-carol")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    assert _logs_in(broker, "carol", "carol-secret", "SCRAM-SHA-256")
    assert _logs_in(broker, "carol", "carol-secret", "PLAIN")  # PLAIN checks the same keys
    assert not _logs_in(broker, "carol", "wrong", "PLAIN")
    broker.process.kill()
    broker.process.start()
    assert _described(_admin(broker), ["carol"])["carol"] == {(ScramMechanism.SCRAM_SHA_256,
                                                                8192)}
    assert _logs_in(broker, "carol", "carol-secret", "SCRAM-SHA-256")
    delete = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)
    admin = _admin(broker)  # held while its futures run
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(TIMEOUT_S)
    broker.process.restart()
    assert not _logs_in(broker, "bob", "bob-secret", "SCRAM-SHA-256")
    assert set(_described(_admin(broker))) == {"alice", "carol"}


AlterRequest = messages.get("AlterUserScramCredentialsRequest").cls
DescribeRequest = messages.get("DescribeUserScramCredentialsRequest").cls


def _alter(broker, deletions=(), upsertions=()) -> dict:
    request = AlterRequest(deletions=[AlterRequest.ScramCredentialDeletion(name=n, mechanism=m)
                                      for n, m in deletions],
                           upsertions=[AlterRequest.ScramCredentialUpsertion(
                               name=n, mechanism=m, iterations=i, salt=b"salt",
                               salted_password=b"x" * 32) for n, m, i in upsertions])
    with WireClient(broker.bootstrap("PLAINTEXT")) as client:
        response = client.request(51, 0, request)
    return {r.user: (ErrorCode(r.error_code), r.error_message) for r in response.results}


def test_kafkas_refusals_with_its_codes_and_words(broker):
    assert _alter(broker, upsertions=[("dave", 1, 1000)])["dave"] == \
        (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert _alter(broker, upsertions=[("dave", 1, 20000)])["dave"] == \
        (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert _alter(broker, upsertions=[("dave", 9, 4096)])["dave"][0] == \
        ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert _alter(broker, upsertions=[("", 1, 4096)])[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert _alter(broker, deletions=[("nobody", 1)])["nobody"][0] == ErrorCode.RESOURCE_NOT_FOUND
    twice = _alter(broker, deletions=[("alice", 2)], upsertions=[("alice", 2, 4096)])
    assert twice["alice"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert _described(_admin(broker), ["alice"])["alice"]  # nothing applied
    with WireClient(broker.bootstrap("PLAINTEXT")) as client:
        response = client.request(50, 0, DescribeRequest(users=[
            DescribeRequest.UserName(name="bob"), DescribeRequest.UserName(name="bob")]))
    assert [(r.user, r.error_code) for r in response.results] == \
        [("bob", ErrorCode.DUPLICATE_RESOURCE)]


def test_user_add_writes_the_first_user_offline_and_refuses_a_running_broker(tmp_path, pki):
    data = tmp_path / "data"
    command = [sys.executable, "-m", "commitgate", "user", "add", "erin", "--data-dir",
               str(data), "--mechanism", "scram-sha-256"]
    done = subprocess.run(command, input="erin-secret\n", capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert "erin-secret" not in (data / "broker" / "scram_credentials.json").read_text()
    assert (data / "broker" / "scram_credentials.json").stat().st_mode & 0o077 == 0
    ports = distinct_ports(["PLAINTEXT", "SASL_PLAINTEXT"])
    with BrokerProcess(data, secure_overrides(ports, pki), port=ports["PLAINTEXT"]) as process:
        assert _logs_in(SecureBroker(process, ports), "erin", "erin-secret", "SCRAM-SHA-256")
        again = subprocess.run(command, input="other\n", capture_output=True, text=True,
                               timeout=60, cwd=tmp_path, check=False)
        assert again.returncode == 1 and "in use by a running broker" in again.stderr
