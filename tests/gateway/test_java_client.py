"""The Java client (kafka-clients 3.9, from the test extra's jar wheel) against a real CommitGate.

tests/clients/java/ClientDriver.java is compiled with javac into a temporary directory and run
once: one JVM runs every scenario and prints one JSON line each (see client_contract.py).
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from tests.gateway.client_contract import *  # the shared client tests
from tests.gateway.client_contract import (
    ClientTraits,
    java_partition,
    missing,
    require_runtime,
    run_driver,
    run_tool,
)

DRIVER = Path(__file__).parent.parent / "clients" / "java" / "ClientDriver.java"
JAR_WHEEL = "shigawire-apache-flink-libraries"
JARS = ["kafka-clients", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api"]
RUN_TIMEOUT_S = 300


def _classpath() -> list[str]:
    try:
        lib = Path(metadata.distribution(JAR_WHEEL).locate_file("pyflink/lib"))
    except metadata.PackageNotFoundError:
        missing(f"{JAR_WHEEL} (the kafka-clients jars) is not installed: pip install -e '.[test]'")
    jars = [lib / f"{name}.jar" for name in JARS]
    absent = [str(j) for j in jars if not j.exists()]
    assert not absent, f"{JAR_WHEEL} lacks {absent}"
    return [str(j) for j in jars]


@pytest.fixture(scope="module")
def reports(broker, tmp_path_factory) -> dict:
    javac, java = require_runtime("javac"), require_runtime("java")
    classes = tmp_path_factory.mktemp("java-driver")
    classpath = _classpath()
    run_tool([javac, "-d", str(classes), "-cp", ":".join(classpath), str(DRIVER)], RUN_TIMEOUT_S)
    return run_driver([java, "-cp", ":".join([*classpath, str(classes)]), "ClientDriver",
                       broker.bootstrap, "java"], RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def traits() -> ClientTraits:
    return ClientTraits(partition_of=java_partition, idempotent_by_default=True,
                        too_large_error="RecordTooLargeException")
