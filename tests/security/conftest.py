"""A certificate authority and certificates made in the test (trustme), SCRAM users written
offline before the broker starts (as ``commitgate user add``), and a broker serving all four
security protocols at once."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from commitgate.gateway.security.scram_store import ScramCredential, ScramStore
from commitgate.launcher import BrokerProcess
from commitgate.launcher.broker_process import free_port

# user: (mechanism, password)
USERS = {"alice": ("SCRAM-SHA-512", "alice-secret"), "bob": ("SCRAM-SHA-256", "bob-secret")}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class Pki:
    ca_file: Path
    server_pem: Path  # key and chain
    client_cert: Path  # CN=alice,OU=apps,O=CommitGate tests
    client_key: Path
    stranger_cert: Path  # issued by another CA
    stranger_key: Path


def _write_cert(cert: trustme.LeafCert, folder: Path, name: str) -> tuple[Path, Path]:
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    return cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca = trustme.CA(organization_name="CommitGate tests")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = ca.issue_cert("localhost", "127.0.0.1")
    server.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    client = ca.issue_cert("alice.clients.test", common_name="alice",
                           organization_unit_name="apps", organization_name="CommitGate tests")
    stranger = trustme.CA().issue_cert("mallory.clients.test", common_name="mallory")
    return Pki(folder / "ca.pem", folder / "server.pem",
               *_write_cert(client, folder, "alice"), *_write_cert(stranger, folder, "mallory"))


def add_users(data_dir: Path, users: dict[str, tuple[str, str]]) -> None:
    """The users' SCRAM credentials, written before the broker starts."""
    store = ScramStore(data_dir / "broker")
    for user, (mechanism, password) in users.items():
        store.put(user, mechanism, ScramCredential.from_password(mechanism, password, 4096))


def distinct_ports(names) -> dict[str, int]:
    ports: dict[str, int] = {}
    for name in names:
        port = free_port()
        while port in ports.values():
            port = free_port()
        ports[name] = port
    return ports


@dataclass
class SecureBroker:
    process: BrokerProcess
    ports: dict[str, int]  # by listener name

    def bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"


def secure_overrides(ports: dict[str, int], pki: Pki, **extra: str) -> dict[str, str]:
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    settings = {"listeners": listeners, "advertised.listeners": listeners,
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "ssl.keystore.location": str(pki.server_pem),
                "ssl.truststore.location": str(pki.ca_file),
                "connection.failed.authentication.delay.ms": "20"}
    if "SSL" in ports:  # client certificates asked for (not required) on the SSL listener
        settings["listener.name.ssl.ssl.client.auth"] = "requested"
    return {**settings, **extra}


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, pki) -> SecureBroker:
    data = tmp_path_factory.mktemp("secure") / "data"
    add_users(data, USERS)
    ports = distinct_ports(PROTOCOLS)
    with BrokerProcess(data, secure_overrides(ports, pki), port=ports["PLAINTEXT"]) as broker:
        yield SecureBroker(broker, ports)
