"""``python -m tests.pipeline.stream_job``: a Spark driver of its own (local[2]) running one
streaming query from a commitgate topic to another through the exactly-once sink, until the input
is drained (trigger availableNow), so that a test can SIGKILL it mid-stream and start it again
from the same checkpoint."""
from __future__ import annotations

import argparse
import os

from pyspark.sql import SparkSession

from commitgate.pipeline import register


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--output", "--checkpoint"):
        parser.add_argument(name, required=True)
    parser.add_argument("--per-trigger", default="300")
    parser.add_argument("--guarantee", default="exactly-once")
    args = parser.parse_args()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = (SparkSession.builder.master("local[2]").appName("commitgate-stream-job")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    stream = (spark.readStream.format("commitgate")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.per_trigger).load())
    query = (stream.selectExpr("key", "concat(value, cast('!' as binary)) AS value")
             .writeStream.format("commitgate")
             .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output)
             .option("deliveryGuarantee", args.guarantee)
             .option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"batches={len(query.recentProgress)}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
