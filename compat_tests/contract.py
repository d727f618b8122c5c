"""The JSON-lines contract between the matrix and a client driver.

A driver is a long-running program of ours in the client's own language. It reads one request
per line on stdin and answers each with one line on stdout, in order:

    request:  {"op": "<name>", ...arguments}
    answer:   {"ok": {...result}}  or  {"error": "<first line: what failed>\\n<detail>"}

Anything else a driver prints (logs) goes to stderr. Bytes travel as hex strings, null as null.
A record is {"key", "value", "headers": [[name, value]], "timestamp", "partition"}; the last two
may be null when producing (the client picks). The operations (scenarios.py composes them):

- hello -> {"client", "version"}
- metadata {topic} -> {"partitions": [ids], "brokers": count}
- create_topic {topic, partitions, configs} / delete_topic {topic} -> {}
- list_topics -> {"topics": [names]}
- describe_configs {topic} -> {"configs": {name: value}}
- alter_config {topic, name, value} -> {}
- create_partitions {topic, total} -> {}
- delete_records {topic, partition, offset} -> {}
- produce {topic, records, config} -> {"sent": [{"partition", "offset"}]} in request order
  (offset -1 where acks=0 gives none). config: compression, idempotent (null = the client's
  default), acks, partitioner ("murmur2" asks librdkafka for murmur2_random), linger_ms,
  batch_bytes, max_request_bytes, transactional_id with abort (commit unless abort).
- consumer_open {name, topic, partitions, group, start, read_committed, group_protocol}
  -> {"positions": {p: o}}
  partitions: a list to assign, or null to subscribe in ``group``; start: "earliest", "latest",
  an offset, {"timestamp": ms} or "committed" (assign at the group's committed offsets).
  Positions are resolved before the answer (empty when subscribing). group_protocol (sent only
  to clients that have KIP-848's): "consumer" subscribes with ``group.protocol=consumer``, and
  then a topic starting with "^" is a regular expression the broker resolves (RE2 syntax).
- poll {name, count, max_ms} -> {"records": [record with partition, offset, timestamp],
  "assignment": [partitions]}: polls until ``count`` records arrived or ``max_ms`` passed.
- commit {name, offsets} -> {"committed": {p: o}}: commits (synchronously) ``offsets``
  ({p: o}, partitions of the consumer's assignment), or its positions when null.
- consumer_close {name} -> {}

A driver started with ``COMMITGATE_COMPAT_CLIENT_SETTINGS`` naming a file adds the settings in it,
in the client's own terms, to every client it builds (a listener's security): a Java properties
file for the Java clients, a librdkafka properties file for kcat (its -F), a JSON object merged
into the configuration for kafkajs and @platformatic/kafka.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None

    def to_json(self) -> dict:
        return {"key": hex_of(self.key), "value": hex_of(self.value),
                "headers": [[k, hex_of(v)] for k, v in self.headers],
                "timestamp": self.timestamp, "partition": self.partition}

    @classmethod
    def from_json(cls, data: dict) -> Record:
        return cls(bytes_of(data.get("key")), bytes_of(data.get("value")),
                   tuple((k, bytes_of(v)) for k, v in data.get("headers") or []),
                   data.get("timestamp"), data.get("partition"), data.get("offset"))

    def content(self) -> tuple:
        """What must survive a round trip byte for byte."""
        return self.key, self.value, self.headers


def hex_of(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def bytes_of(text: str | None) -> bytes | None:
    return None if text is None else bytes.fromhex(text)


class DriverError(Exception):
    """The client (through its driver) reported a failure."""


class DriverGone(Exception):
    """The driver process died or stopped answering: no later request can be sent."""


@dataclass
class DriverProcess:
    """One driver process, spoken to request by request with a bounded wait for each answer."""
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)  # beside this process's environment
    process: subprocess.Popen | None = None
    answers: queue.Queue = field(default_factory=queue.Queue)
    stderr_tail: list[str] = field(default_factory=list)

    def start(self) -> DriverProcess:
        self.process = subprocess.Popen(
            self.command, text=True, bufsize=1, env={**os.environ, **self.env},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        return self

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):  # libraries may print to stdout too
                self.answers.put(line)
        self.answers.put(None)  # end of stream: the driver exited

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr_tail = [*self.stderr_tail[-19:], line.rstrip()]

    def call(self, op: str, timeout_s: float, **arguments) -> dict:
        if self.process is None or self.process.poll() is not None:
            raise DriverGone(f"the driver is not running{self._stderr()}")
        try:
            self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
            self.process.stdin.flush()
            line = self.answers.get(timeout=timeout_s)
        except BrokenPipeError:
            line = None
        except queue.Empty:
            self.stop()
            raise DriverGone(f"{op}: no answer within {timeout_s:.0f}s") from None
        if line is None:
            raise DriverGone(f"{op}: the driver exited{self._stderr()}")
        answer = json.loads(line)
        if "error" in answer:
            raise DriverError(answer["error"])
        return answer["ok"]

    def _stderr(self) -> str:
        return (": " + " | ".join(self.stderr_tail[-3:])) if self.stderr_tail else ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                self.process.stdin.close()  # a driver ends at the end of its input
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self.process = None


def records_json(records: Iterable[Record]) -> list[dict]:
    return [r.to_json() for r in records]
