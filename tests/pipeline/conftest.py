"""A real broker subprocess and a real local SparkSession (local[2]), one of each per module."""
from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from commitgate.pipeline import register
from tests.gateway.conftest import broker  # noqa: F401 - the module-scoped broker fixture


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    # Spark would otherwise bind its block manager to the machine's outside address
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (SparkSession.builder.master("local[2]").appName("commitgate-tests")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    register(session)
    yield session
    session.stop()
