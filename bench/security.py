"""What security costs: produce and fetch MB/s over SASL_SSL (SCRAM-SHA-512) beside PLAINTEXT on
one broker that serves both, in rounds that alternate which goes first, and SCRAM connection
set-ups per second beside plaintext ones.

Each round produces ``records`` records of ``size`` bytes over ``partitions`` partitions of a
new topic with a librdkafka producer process (bench/loadgen.py), then reads them back from the
start with a librdkafka consumer process; MB/s is over each process's own timed window, medians
over the rounds, ratios SASL_SSL / PLAINTEXT. The certificates are made for the run (a CA and a
server certificate for 127.0.0.1), the SCRAM user written before the broker starts. A set-up is
a new librdkafka client up to its first Metadata answer (TCP, TLS, SaslHandshake and the SCRAM
exchange on SASL_SSL), timed in this process.

Targets (issue 33): TLS produce >= 70% of plaintext, TLS fetch >= 50% (no sendfile through TLS;
CPython's ``ssl`` has no kernel TLS before 3.12).

    python -m commitgate.bench.security [--records N] [--size B] [--partitions P] [--rounds R]
"""
from __future__ import annotations

import argparse
import datetime
import ipaddress
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from commitgate.bench.loadgen import mb_per_s, run_process
from commitgate.gateway.security.scram_store import ScramCredential, ScramStore
from commitgate.launcher import BrokerProcess
from commitgate.launcher.broker_process import free_port

USER, PASSWORD = "bench", "bench-secret"
TARGETS = {"produce": 0.70, "fetch": 0.50}


def _certificates(folder: Path) -> tuple[Path, Path]:
    """A CA (its PEM) and the broker's key with its certificate for 127.0.0.1 (one PEM)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "commitgate bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
              .issuer_name(ca_name).public_key(key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName(
                  [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + server.public_bytes(pem))
    return folder / "ca.pem", folder / "server.pem"


def _client_settings(protocol: str, ca: Path) -> dict[str, str]:
    if protocol == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(ca)}


def _round(bootstrap: str, settings: dict[str, str], topic: str,
           args: argparse.Namespace) -> tuple[float, float]:
    common = ["--bootstrap", bootstrap, "--topic", topic, "--count", str(args.records),
              "--size", str(args.size)]
    for key, value in settings.items():
        common += ["--set", f"{key}={value}"]
    produced = run_process("produce", *common, "--partitions", str(args.partitions))
    fetched = run_process("consume", *common, "--until-eof",
                       "--partition-list", ",".join(map(str, range(args.partitions))))
    if fetched["records"] != args.records:
        raise RuntimeError(f"{topic}: read {fetched['records']} of {args.records} records")
    return mb_per_s(produced), mb_per_s(fetched)


def _setups_per_s(bootstrap: str, settings: dict[str, str], count: int) -> float:
    began = time.perf_counter()
    for _ in range(count):
        client = Producer({"bootstrap.servers": bootstrap, **settings})
        client.list_topics(timeout=30)
        client.flush(0)
        del client
    return count / (time.perf_counter() - began)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="per round and side")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=50, help="set-ups timed per side")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="commitgate-bench-security-") as tmp:
        folder = Path(tmp)
        ca, server = _certificates(folder)
        ScramStore(folder / "data" / "broker").put(
            USER, "SCRAM-SHA-512", ScramCredential.from_password("SCRAM-SHA-512", PASSWORD))
        plain_port, secure_port = free_port(), free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{secure_port}"
        settings = {"listeners": listeners, "advertised.listeners": listeners,
                    "num.partitions": str(args.partitions),
                    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                    "ssl.keystore.location": str(server)}
        with BrokerProcess(folder / "data", settings, port=plain_port):
            sides = {"PLAINTEXT": f"127.0.0.1:{plain_port}",
                     "SASL_SSL": f"127.0.0.1:{secure_port}"}
            _run(sides, ca, args)


def _run(sides: dict[str, str], ca: Path, args: argparse.Namespace) -> None:
    print(f"{args.rounds} rounds of {args.records:,} records of {args.size} bytes over "
          f"{args.partitions} partitions per side (one untimed round first)", flush=True)
    for name, bootstrap in sides.items():  # warm both paths
        _round(bootstrap, _client_settings(name, ca), f"warm-{name}", args)
    figures: dict[str, dict[str, list[float]]] = {n: {"produce": [], "fetch": []} for n in sides}
    for number in range(args.rounds):
        order = list(sides) if number % 2 == 0 else list(sides)[::-1]
        for name in order:
            produce, fetch = _round(sides[name], _client_settings(name, ca),
                                    f"round-{number}-{name}", args)
            figures[name]["produce"].append(produce)
            figures[name]["fetch"].append(fetch)
        print(f"round {number + 1}/{args.rounds}: " + "; ".join(
            f"{n} produce {figures[n]['produce'][-1]:.1f} fetch {figures[n]['fetch'][-1]:.1f} "
            f"MB/s" for n in sides), flush=True)
    print(f"\n{'median MB/s':<14}{'PLAINTEXT':>12}{'SASL_SSL':>12}{'ratio':>8}  target")
    for what, target in TARGETS.items():
        plain = statistics.median(figures["PLAINTEXT"][what])
        secure = statistics.median(figures["SASL_SSL"][what])
        ratio = secure / plain if plain else 0.0
        verdict = "met" if ratio >= target else "NOT met"
        print(f"{what:<14}{plain:>12.1f}{secure:>12.1f}{ratio:>8.2f}  >= {target:.2f}: {verdict}")
    plain_rate = _setups_per_s(sides["PLAINTEXT"], {}, args.connections)
    secure_rate = _setups_per_s(sides["SASL_SSL"], _client_settings("SASL_SSL", ca),
                                args.connections)
    print(f"\nclient set-ups per second (to the first Metadata answer): PLAINTEXT "
          f"{plain_rate:.1f}, SASL_SSL with SCRAM-SHA-512 {secure_rate:.1f}")


if __name__ == "__main__":
    main()
