"""Protocol codec benchmark: CommitGate's schema compiler against kio and kafka-python.

The two hot paths of a broker: decoding a Produce request and encoding a Fetch response.
Each codec runs the same message shapes, alternating rounds (A B C A B C ...) so machine
noise hits all alike; the table shows the best round per codec in microseconds per message
and the ratio to CommitGate. kio is optional (``pip install kio``); kafka-python is a
dependency already.
"""
from __future__ import annotations

import datetime
import io
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from commitgate.protocol import messages
from commitgate.protocol.codec import Chunks

PRODUCE_VERSION = 9
FETCH_VERSION = 12


@dataclass(frozen=True)
class Shape:
    name: str
    partitions: int
    record_bytes: int  # per partition


SHAPES = [Shape("1 partition x 64 KiB", 1, 64 << 10), Shape("100 partitions x 16 KiB", 100, 16 << 10),
          Shape("1 partition x 1 MiB", 1, 1 << 20)]


def _produce_bytes(shape: Shape) -> bytes:
    codec = messages.get("ProduceRequest")
    r = codec.cls
    return codec.encode(r(acks=-1, timeout_ms=30_000, topic_data=[r.TopicProduceData(
        name="bench", partition_data=[r.PartitionProduceData(index=p, records=b"r" * shape.record_bytes)
                                      for p in range(shape.partitions)])]), PRODUCE_VERSION)


def _ours(shape: Shape) -> tuple[Callable[[], object], Callable[[], object]]:
    request = memoryview(bytearray(_produce_bytes(shape)))
    produce = messages.get("ProduceRequest")
    fetch = messages.get("FetchResponse")
    r = fetch.cls
    segment = memoryview(bytearray(shape.record_bytes * shape.partitions))  # a mapped file stand-in
    partitions = [r.PartitionData(partition_index=p, high_watermark=10, records=[
        segment[p * shape.record_bytes:(p + 1) * shape.record_bytes]])
        for p in range(shape.partitions)]
    response = r(responses=[r.FetchableTopicResponse(topic="bench", partitions=partitions)])

    def encode() -> object:
        chunks = Chunks()
        chunks.parts.append(fetch.encode_into(response, FETCH_VERSION, chunks, bytearray()))
        return chunks.parts

    return (lambda: produce.decode(request, PRODUCE_VERSION)), encode


def _kafka_python(shape: Shape) -> tuple[Callable[[], object], Callable[[], object]]:
    from kafka.protocol.consumer.fetch import FetchResponse
    from kafka.protocol.producer.produce import ProduceRequest

    request = _produce_bytes(shape)
    p = FetchResponse.FetchableTopicResponse.PartitionData
    response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="bench", partitions=[
            p(partition_index=i, error_code=0, high_watermark=10, records=b"r" * shape.record_bytes)
            for i in range(shape.partitions)])])
    return ((lambda: ProduceRequest.decode(request, version=PRODUCE_VERSION)),
            (lambda: response.encode(version=FETCH_VERSION)))


def _kio(shape: Shape) -> tuple[Callable[[], object], Callable[[], object]] | None:
    try:
        from kio.schema.errors import ErrorCode
        from kio.schema.fetch.v12 import response as kf
        from kio.schema.produce.v9 import request as kp
        from kio.serial import entity_reader, entity_writer
    except ImportError:
        return None
    request = _produce_bytes(shape)
    read = entity_reader(kp.ProduceRequest)
    write = entity_writer(kf.FetchResponse)
    response = kf.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                                responses=(kf.FetchableTopicResponse(topic="bench", partitions=tuple(
                                    kf.PartitionData(partition_index=i, error_code=ErrorCode.none,
                                                     high_watermark=10, aborted_transactions=None,
                                                     records=b"r" * shape.record_bytes)
                                    for i in range(shape.partitions))),))

    def encode() -> object:
        out = io.BytesIO()
        write(out, response)
        return out

    return (lambda: read(request, 0)), encode


CODECS = {"CommitGate": _ours, "kio": _kio, "kafka-python": _kafka_python}


def _time(fn: Callable[[], object], seconds: float = 0.3) -> float:
    """Microseconds per call: calls repeated for about ``seconds``."""
    count, start = 0, time.perf_counter()
    while True:
        fn()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or count >= 100_000:
            return elapsed / count * 1e6


def main(rounds: int = 3) -> None:
    console = Console()
    table = Table(title="Codec: us per message, best of rounds (ratio to CommitGate)")
    table.add_column("work")
    for name in CODECS:
        table.add_column(name, justify="right")
    for shape in SHAPES:
        makers = {name: make(shape) for name, make in CODECS.items()}
        for index, label in ((0, "Produce v9 decode"), (1, "Fetch v12 encode")):
            best = {name: float("inf") for name in makers}
            for _ in range(rounds):
                for name, fns in makers.items():
                    if fns is not None:
                        best[name] = min(best[name], _time(fns[index]))
            ours = best["CommitGate"]
            cells = ["not installed" if makers[n] is None else f"{us:,.1f} ({us / ours:.1f}x)"
                     for n, us in best.items()]
            table.add_row(f"{label}, {shape.name}", *cells)
    console.print(table)


if __name__ == "__main__":
    main()
