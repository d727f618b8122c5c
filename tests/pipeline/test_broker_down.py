"""A broker that is down: reads and writes fail soon, naming kafka.bootstrap.servers."""
from __future__ import annotations

import socket
import time

import pytest
from pyspark.errors import PySparkException

from tests.pipeline.test_source import read

# kafka-python's bootstrap_timeout_ms (default 30 s), set through the kafka.* pass-through
BOOTSTRAP_TIMEOUT = {"kafka.bootstrap.timeout.ms": "2000"}
# far above the 2 s bootstrap timeout plus a Spark job on a loaded machine, far below a hang
BOUND_SECONDS = 90


@pytest.fixture
def down() -> str:
    """An address nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_read_from_a_down_broker(spark, down):
    began = time.monotonic()
    with pytest.raises(PySparkException, match=rf"'kafka.bootstrap.servers' = '{down}'"):
        read(spark, down, subscribe="anything", **BOOTSTRAP_TIMEOUT).collect()
    assert time.monotonic() - began < BOUND_SECONDS


def test_write_to_a_down_broker(spark, down):
    frame = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(100)], "key string, "
                                  "value string").repartition(2)
    began = time.monotonic()
    with pytest.raises(PySparkException, match=rf"'kafka.bootstrap.servers' = '{down}'"):
        writer = frame.write.format("commitgate").option("kafka.bootstrap.servers", down)
        for key, value in BOOTSTRAP_TIMEOUT.items():
            writer = writer.option(key, value)
        writer.option("topic", "down-out").mode("append").save()
    assert time.monotonic() - began < BOUND_SECONDS
