"""The ``commitgate`` Spark data source (PySpark 4): ``from commitgate.pipeline import register``.

Spark is imported only when ``register`` is called, so that the command line and the
benchmarks can import the package's light modules without the ``pipeline`` extra.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``commitgate`` format with ``spark`` (once per session)."""
    from commitgate.pipeline.source import register as register_source

    register_source(spark)
