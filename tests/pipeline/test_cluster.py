"""The same batch read on a Spark standalone cluster: a master and two workers from pyspark's own
spark-class, each worker running one executor; the read's tasks run on both executors."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from kafka import KafkaProducer
from pyspark import SparkContext
from pyspark.sql import SparkSession

from commitgate.pipeline import register
from tests.pipeline.test_source import create_topic

SPARK_HOME = Path(pyspark.__file__).parent
RECORDS = 2000
PARTITIONS = 4
START_TIMEOUT = 120  # JVM start-ups on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def wait_for(what: str, check, timeout: float = START_TIMEOUT):
    """Poll `check` until it returns a true value; its last error is in the failure message."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except OSError as exc:  # the UI not listening yet
            last = exc
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what} (last error: {last})")


class Cluster:
    """Master and worker JVMs, each in its own process group so their executors die with them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOG_DIR": str(root / "logs"), "PYSPARK_PYTHON": sys.executable,
                    "SPARK_NO_DAEMONIZE": "1"}
        self.processes: list[subprocess.Popen] = []
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"

    def start(self, workers: int) -> None:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(workers):
            work = self.root / f"worker-{i}"
            work.mkdir()
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                        "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                        "--webui-port", str(free_port()), "--work-dir", str(work))
        wait_for(f"{workers} ALIVE workers at {self.url}", lambda: self.alive_workers() == workers)

    def _spawn(self, name: str, cls: str, *args: str) -> None:
        with open(self.root / f"{name}.log", "wb") as log:
            self.processes.append(subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), cls, *args], env=self.env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def alive_workers(self) -> int:
        for process in self.processes:
            assert process.poll() is None, f"a Spark daemon exited early: see {self.root}"
        state = get_json(f"http://127.0.0.1:{self.ui_port}/json/")
        return sum(1 for w in state["workers"] if w["state"] == "ALIVE")

    def stop(self) -> None:
        # workers first (they kill their executors), then the master; whole process groups
        for process in reversed(self.processes):
            _terminate(process)


def _terminate(process: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            continue


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    if SparkContext._active_spark_context is not None:
        # a module-scoped local[2] session of another module may still be up in this process
        SparkContext._active_spark_context.stop()
    (tmp_path / "logs").mkdir()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(workers=2)
        yield cluster
    finally:
        cluster.stop()
        groups = [p.pid for p in cluster.processes]
        wait_for("every master, worker and executor process to exit",
                 lambda: not any(group_alive(pgid) for pgid in groups), timeout=60)


def cluster_session(cluster: Cluster, ui_port: int) -> SparkSession:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    return (SparkSession.builder.master(cluster.url).appName("commitgate-cluster-test")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            # builder options are shared by every builder: a local session's may linger
            .config("spark.ui.enabled", "true")
            .config("spark.ui.port", str(ui_port))
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", "2")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.pyspark.driver.python", sys.executable)
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate())


def executor_tasks(spark: SparkSession, ui_port: int) -> dict[str, int]:
    """Completed tasks per executor (driver excluded), from the driver's REST API."""
    app = spark.sparkContext.applicationId
    executors = get_json(f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/executors")
    return {e["id"]: e["completedTasks"] for e in executors if e["id"] != "driver"}


def test_batch_read_on_standalone_cluster(cluster, broker):
    create_topic(broker.bootstrap, "cluster-in", PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(RECORDS):
        producer.send("cluster-in", key=b"k%d" % i, value=b"value-%d" % i,
                      partition=i % PARTITIONS)
    producer.flush()
    producer.close()

    ui_port = free_port()
    spark = cluster_session(cluster, ui_port)
    try:
        register(spark)
        wait_for("an executor on each worker",
                 lambda: len(executor_tasks(spark, ui_port)) == 2)
        frame = (spark.read.format("commitgate")
                 .option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", "cluster-in").option("minPartitions", "8").load())
        assert frame.rdd.getNumPartitions() == 8
        rows = frame.select("key", "value", "partition", "offset").collect()
        assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == sorted(
            (i % PARTITIONS, i // PARTITIONS, b"k%d" % i, b"value-%d" % i)
            for i in range(RECORDS))
        # the listener bus updates the REST view asynchronously
        wait_for("the read's tasks in the executors' counts",
                 lambda: sum(executor_tasks(spark, ui_port).values()) >= 8)
        tasks = executor_tasks(spark, ui_port)
        assert len(tasks) == 2 and all(count > 0 for count in tasks.values()), tasks
    finally:
        spark.stop()
