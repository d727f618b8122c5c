"""kcat (librdkafka's command-line client) behind the JSON-lines contract (contract.py): each
operation runs kcat. kcat has no admin API, no group commits and no record timestamps; the
matrix marks those cells not-applicable. It reports no delivery offsets either, so a produce
reads the partitions back from their old ends and matches the records it sent, in order.
usage: python -m commitgate.compat_tests.drivers.kcat.driver BOOTSTRAP"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import groupby

from commitgate.compat_tests.contract import bytes_of, hex_of
from commitgate.compat_tests.drivers.serve import serve

TIMEOUT_S = 60.0
MESSAGE_END = b"\x1e\x1f<end>\x1f\x1e"  # -D: between messages
KEY_END = b"\x1d\x1c<key>\x1c\x1d"  # -K: between key and value
RECORD = "@@record %p %o %T %K %S\n%k%s%h\n"  # -f: lengths first, so bytes are read exactly
EARLIEST, LATEST = -2, -1  # kcat -Q's logical timestamps
SETTINGS = (("compression", "compression.type"), ("acks", "acks"),
            ("idempotent", "enable.idempotence"), ("linger_ms", "linger.ms"),
            ("batch_bytes", "batch.size"), ("max_request_bytes", "message.max.bytes"),
            ("transactional_id", "transactional.id"))


class Driver:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.consumers: dict[str, dict] = {}
        # a librdkafka properties file (a listener's security): kcat's own -F
        settings = os.environ.get("COMMITGATE_COMPAT_CLIENT_SETTINGS")
        self.settings = ["-F", settings] if settings else []

    def kcat(self, *args: str, data: bytes = b"", timeout_s: float = TIMEOUT_S) -> bytes:
        run = subprocess.run(["kcat", "-b", self.bootstrap, *self.settings, *args], input=data,
                             capture_output=True, timeout=timeout_s, check=False)
        errors = [line for line in run.stderr.decode(errors="replace").splitlines()
                  if "ERROR" in line]
        if run.returncode != 0 or errors:
            raise RuntimeError((errors or [f"kcat exited {run.returncode}"])[0])
        return run.stdout

    def hello(self) -> dict:
        run = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False)
        version = next(line for line in run.stdout.splitlines() if line.startswith("Version"))
        return {"client": "kcat", "version": version.split(" (")[0].removeprefix("Version ")
                + " (librdkafka " + version.split("librdkafka ")[1].split()[0] + ")"}

    def metadata(self, topic: str) -> dict:
        found = json.loads(self.kcat("-L", "-J", "-t", topic))
        [described] = found["topics"]
        if described.get("error"):
            raise RuntimeError(described["error"])
        return {"partitions": sorted(p["partition"] for p in described["partitions"]),
                "brokers": len(found["brokers"])}

    def offsets(self, topic: str, partitions: list[int], at: int) -> dict[int, int]:
        query = [arg for p in partitions for arg in ("-t", f"{topic}:{p}:{at}")]
        found = json.loads(self.kcat("-Q", "-J", *query))
        return {int(p): entry["offset"] for p, entry in found[topic].items()
                if p.isdigit()}

    # ---- produce --------------------------------------------------------------------------------

    def produce(self, topic: str, records: list[dict], config: dict) -> dict:
        if config.get("abort"):
            raise RuntimeError("kcat commits its transaction: it cannot abort one")
        settings = [arg for key, name in SETTINGS if config.get(key) is not None
                    for arg in ("-X", f"{name}={str(config[key]).lower()}")]
        if config.get("partitioner") == "murmur2":
            settings += ["-X", "partitioner=murmur2_random"]  # Kafka's, for keyed records
        try:
            partitions = self.metadata(topic)["partitions"]
            before = self.offsets(topic, partitions, LATEST)
        except RuntimeError:
            before = {}  # not there yet: the producer creates it
        for kind, run in groupby(records, key=_run_kind):
            self._produce_run(topic, list(run), kind, settings)
        return {"sent": self._placed(topic, records, before)}

    def _produce_run(self, topic: str, records: list[dict], kind: tuple, settings: list) -> None:
        """One kcat invocation for records sharing headers, partition and nullness."""
        headers, partition, null_key, null_value = kind
        args = ["-P", "-t", topic, "-D", MESSAGE_END.decode(), *settings]
        for name, value in headers:
            value_bytes = bytes_of(value)
            if value_bytes is not None and b"\x00" in value_bytes:
                raise RuntimeError("kcat takes header values as arguments: no NUL bytes")
            # argv is encoded as UTF-8 with surrogateescape: this gives back the exact bytes
            text = None if value_bytes is None else value_bytes.decode("utf-8", "surrogateescape")
            args += ["-H", name if text is None else f"{name}={text}"]
        if partition is not None:
            args += ["-p", str(partition)]
        if not null_key:
            args += ["-K", KEY_END.decode()]
        if null_value:
            args += ["-Z"]  # an empty message is sent as a null value
        data = b""
        for r in records:
            key, value = bytes_of(r["key"]) or b"", bytes_of(r["value"]) or b""
            if MESSAGE_END in key + value or KEY_END in key + value:
                raise RuntimeError("a record holds kcat's delimiter")
            data += (b"" if null_key else key + KEY_END) + value + MESSAGE_END
        self.kcat(*args, data=data)

    def _placed(self, topic: str, records: list[dict], before: dict[int, int]) -> list[dict]:
        """Where each record landed: read back from the old ends, matched in order."""
        partitions = self.metadata(topic)["partitions"]
        end = self.offsets(topic, partitions, LATEST)
        found: list[dict] = []
        for p in partitions:
            start = before.get(p, 0)
            if end[p] > start:
                found += self.read(topic, p, start, end[p] - start)
        placed = []
        for r in records:
            match = next((f for f in found if _same(f, r)), None)
            if match is not None:
                found.remove(match)
            placed.append({"partition": match["partition"] if match else 0,
                           "offset": match["offset"] if match else -1})
        return placed

    # ---- consume --------------------------------------------------------------------------------

    def read(self, topic: str, partition: int, offset: int, count: int,
             read_committed: bool = False) -> list[dict]:
        isolation = "read_committed" if read_committed else "read_uncommitted"
        out = self.kcat("-C", "-t", topic, "-p", str(partition), "-o", str(offset), "-c",
                        str(count), "-e", "-f", RECORD, "-X", f"isolation.level={isolation}")
        return _parse(out)

    def consumer_open(self, name: str, topic: str, partitions: list[int] | None,
                      group: str | None, start, read_committed: bool = False) -> dict:
        if partitions is None or start == "committed":
            raise RuntimeError("kcat drives no group commits")
        if isinstance(start, int):
            positions = {p: start for p in partitions}
        else:
            at = {"earliest": EARLIEST, "latest": LATEST}.get(start) if isinstance(start, str) \
                else start["timestamp"]
            positions = self.offsets(topic, partitions, at)
            if isinstance(start, dict):  # no record at or after: the end
                ends = self.offsets(topic, partitions, LATEST)
                positions = {p: o if o >= 0 else ends[p] for p, o in positions.items()}
        self.consumers[name] = {"topic": topic, "positions": positions,
                                "read_committed": read_committed}
        return {"positions": {str(p): o for p, o in positions.items()}}

    def poll(self, name: str, count: int, max_ms: int) -> dict:
        c = self.consumers[name]
        out: list[dict] = []
        for p, position in c["positions"].items():
            if len(out) >= count:
                break
            got = self.read(c["topic"], p, position, count - len(out), c["read_committed"])
            if got:
                c["positions"][p] = got[-1]["offset"] + 1
            out += got
        return {"records": out, "assignment": sorted(c["positions"])}

    def consumer_close(self, name: str) -> None:
        self.consumers.pop(name)


def _run_kind(record: dict) -> tuple:
    return (tuple(tuple(h) for h in record["headers"]), record.get("partition"),
            record["key"] is None, record["value"] is None)


def _same(found: dict, sent: dict) -> bool:
    return (found["key"], found["value"], found["headers"]) == \
        (sent["key"], sent["value"], [list(h) for h in sent["headers"]])


def _parse(out: bytes) -> list[dict]:
    records = []
    pos = 0
    while (start := out.find(b"@@record ", pos)) >= 0:
        line_end = out.index(b"\n", start)
        partition, offset, timestamp, key_len, value_len = map(int, out[start + 9:line_end].split())
        pos = line_end + 1
        key = out[pos:pos + max(key_len, 0)] if key_len >= 0 else None
        pos += max(key_len, 0)
        value = out[pos:pos + max(value_len, 0)] if value_len >= 0 else None
        pos += max(value_len, 0)
        header_end = out.index(b"\n", pos)
        headers = [h.split(b"=", 1) for h in out[pos:header_end].split(b",") if h]
        pos = header_end + 1
        records.append({"partition": partition, "offset": offset, "timestamp": timestamp,
                        "key": hex_of(key), "value": hex_of(value),
                        "headers": [[n.decode(), hex_of(v[0]) if v else None]
                                    for n, *v in headers]})
    return records


if __name__ == "__main__":
    serve(Driver(sys.argv[1]))
