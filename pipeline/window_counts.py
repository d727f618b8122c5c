"""The reference pipeline's Structured Streaming job: clicks per page in event-time windows.

Reads click events (pipeline/clicks.py) from one topic through the `commitgate` source, counts
them per page in tumbling event-time windows behind a watermark, and writes the counts to a
result topic through the `commitgate` sink: key ``<window start ms>:<page>``, value
``{"window_start": ms, "window_end": ms, "page": ..., "clicks": n}``.

- update mode (default): every micro-batch writes the counts it changed; the last record of a key
  is that window's current count, final once the watermark passes the window's end.
- append mode: a window's counts are written once, when the watermark passes its end.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from enum import Enum
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from commitgate.pipeline.source import register

CLICK_SCHEMA = "user string, page string, ts long"
POLL_S = 0.05


class OutputMode(str, Enum):
    update = "update"  # every micro-batch writes the counts it changed
    append = "append"  # each window's counts once, when the watermark passes its end


@dataclass(frozen=True)
class WindowCount:
    window_start: int  # ms since the epoch
    window_end: int
    page: str
    clicks: int

    @classmethod
    def from_value(cls, value: bytes) -> WindowCount:
        return cls(**json.loads(value))


def demo_session(master: str = "local[2]", app_name: str = "commitgate-demo") -> SparkSession:
    """A quiet SparkSession for the pipeline: UI off, 2 shuffle partitions, commitgate registered."""
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.log.level", "ERROR"))
    if master.startswith("local"):
        # Spark would otherwise bind its driver and block manager to the machine's outside address
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def start_counts_query(spark: SparkSession, bootstrap: str, input_topic: str,
                       result_topic: str, checkpoint: str, window: str = "10 seconds",
                       watermark: str = "10 seconds", trigger: str = "1 second",
                       output_mode: str = "update") -> StreamingQuery:
    """Start the clicks-per-page-per-window query from input_topic to result_topic."""
    if output_mode not in {mode.value for mode in OutputMode}:
        raise ValueError(f"output mode must be update or append, got {output_mode!r}")
    clicks = (spark.readStream.format("commitgate")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", input_topic)
              .option("startingOffsets", "earliest")  # events sent while Spark was starting
              .load()
              .select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("click"))
              .select("click.page", F.timestamp_millis("click.ts").alias("event_time"))
              # a value that is not a click event has no page or time: nothing to count
              .where("page IS NOT NULL AND event_time IS NOT NULL"))
    counts = (clicks.withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window).alias("window"), "page").count())
    start, end = F.unix_millis("window.start"), F.unix_millis("window.end")
    results = counts.select(
        F.concat_ws(":", start.cast("string"), "page").alias("key"),
        F.to_json(F.struct(start.alias("window_start"), end.alias("window_end"), "page",
                           F.col("count").alias("clicks"))).alias("value"))
    writer = (results.writeStream.outputMode(output_mode)
              .option("checkpointLocation", checkpoint)
              .trigger(processingTime=trigger)
              .queryName(f"click-counts-{result_topic}"))
    if output_mode == "update":
        # Spark takes no update-mode stream into a Python data source (its write builder lacks
        # SupportsStreamingUpdateAsAppend), so each micro-batch's changed counts go through the
        # commitgate batch sink; a replayed micro-batch writes the same counts again
        return writer.foreachBatch(partial(write_counts, bootstrap, result_topic)).start()
    return (writer.format("commitgate").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", result_topic).start())


def write_counts(bootstrap: str, topic: str, counts: DataFrame, batch_id: int) -> None:
    """Write one micro-batch's changed counts (key, value) to the result topic."""
    (counts.write.format("commitgate").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).mode("append").save())


def stop_between_batches(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Stop the query once it has caught up and sits between micro-batches (or after timeout_s).

    StreamingQuery.stop() interrupts a running micro-batch, whose write then fails noisily.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        status = query.status
        if not status["isDataAvailable"] and not status["isTriggerActive"]:
            break
        time.sleep(POLL_S)
    query.stop()
