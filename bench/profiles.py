"""The broker benchmark's profiles: the same workloads at three sizes. ``quick`` is meant to
finish in under 3 minutes, ``full`` in under 30, ``tiny`` in seconds (the test suite's, for
its accounting only)."""
from __future__ import annotations

from dataclasses import dataclass

from commitgate.bench.workloads import FETCH, LATENCY, PRODUCE, Workload

PRODUCE_ACKS1 = "produce 1 KiB acks=1"
PRODUCE_ACKSALL = "produce 1 KiB acks=all"
FETCH_1, FETCH_4 = "fetch 1 KiB, 1 consumer", "fetch 1 KiB, 4 consumers"
FETCH_16K = "fetch 16 KiB, 1 consumer"  # the broker issue's fetch figure
LATENCY_HALF = "end-to-end latency at half load"
SMALL = "produce 100 B acks=1"
# transactions (issue 23): each held against its non-transactional twin, measured beside it
PRODUCE_IDEMPOTENT = "produce 1 KiB idempotent"
PRODUCE_TXN = "produce 1 KiB transactional, commit every 100 ms"
FETCH_UNCOMMITTED = "fetch 1 KiB, 10% aborted, read_uncommitted"
FETCH_COMMITTED = "fetch 1 KiB, 10% aborted, read_committed"
TXN_RECORDS = 100  # records a transaction of the aborted-transactions backlog


def partitions_name(partitions: int) -> str:
    return f"produce 1 KiB acks=1, {partitions:,} partitions"


def producers_name(producers: int) -> str:
    return f"produce 1 KiB acks=all, {producers} producers"


def connections_name(producers: int, rate: float) -> str:
    return f"{producers} producers at {rate:g} records/s each"


@dataclass(frozen=True)
class Profile:
    rounds: int
    workloads: list[Workload]
    verify: bool = False  # read every produced topic back (untimed) to count what it holds
    profile_seconds: float = 10.0  # how long py-spy watches each profiled workload at least


def _workloads(records: int, partitions: list[int], backlog: int, seconds: float, fan_in: int,
               connections: int, rate: float, txn_records: int) -> list[Workload]:
    """``records`` 1 KiB records a produce measurement; ``backlog`` records a partition for the
    fetch workloads (noida-db 0.2.2 returns nothing from a partition of 200,000); ``fan_in``
    producers beside the SYNC_FLUSH CommitGate; ``connections`` producers at ``rate`` each,
    over 4 processes; ``txn_records`` for the transactional produce and its twin (enough for
    several 100 ms commits)."""
    return [
        Workload(PRODUCE_ACKS1, PRODUCE, records, sync_flush=True),
        Workload(PRODUCE_ACKSALL, PRODUCE, records, acks="all", sync_flush=True),
        Workload(producers_name(fan_in), PRODUCE, records, acks="all", processes=4,
                 producers=fan_in // 4, sync_flush=True),
        *(Workload(partitions_name(n), PRODUCE, records, partitions=n) for n in partitions),
        Workload(FETCH_1, FETCH, backlog),
        Workload(FETCH_4, FETCH, 4 * backlog, consumers=4),
        Workload(FETCH_16K, FETCH, max(1, backlog // 16), size=16 * 1024),
        Workload(LATENCY_HALF, LATENCY, 0, seconds=seconds),
        Workload(SMALL, PRODUCE, 3 * records, size=100),
        Workload(connections_name(connections, rate), PRODUCE, int(connections * rate * seconds),
                 processes=4, producers=connections // 4, rate=rate),
        *_transactions(txn_records, 2 * backlog),
    ]


def _transactions(records: int, backlog: int) -> list[Workload]:
    """Issue 23's two ratios: a producer committing every 100 ms against an idempotent one
    (transactions need idempotence, so that is the fair baseline), and read_committed against
    read_uncommitted on one backlog in which every 10th transaction of 100 records is
    aborted (10% of the records); twice the other fetch workloads' backlog, so that the
    consumer's start weighs less against a ratio's target."""
    shape = {"txn_records": TXN_RECORDS, "abort_every": 10, "isolation": "read_uncommitted"}
    return [
        Workload(PRODUCE_IDEMPOTENT, PRODUCE, records, acks="all", idempotent=True),
        Workload(PRODUCE_TXN, PRODUCE, records, acks="all", idempotent=True, commit_ms=100,
                 versus=PRODUCE_IDEMPOTENT, goal=0.8),
        Workload(FETCH_UNCOMMITTED, FETCH, backlog, **shape),
        Workload(FETCH_COMMITTED, FETCH, backlog, **{**shape, "isolation": "read_committed"},
                 versus=FETCH_UNCOMMITTED, goal=0.9),
    ]


PROFILES = {
    "tiny": Profile(1, _workloads(2_000, [10], 2_000, 1.0, 4, 8, 50.0, 2_000), verify=True,
                    profile_seconds=1.0),
    "quick": Profile(2, _workloads(50_000, [100, 1_000, 10_000], 50_000, 2.0, 64, 200, 20.0,
                                   200_000)),
    "full": Profile(5, _workloads(400_000, [100, 1_000, 10_000], 50_000, 10.0, 64, 200, 20.0,
                                  400_000)),
}
