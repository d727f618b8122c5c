"""PNG charts of a broker benchmark run (matplotlib, drawn off-screen): throughput per workload,
the partition-scaling curve, latencies."""
from __future__ import annotations

from pathlib import Path

from commitgate.bench.profiles import Profile
from commitgate.bench.targets import Target
from commitgate.bench.workloads import FETCH, LATENCY, PRODUCE, Workload

LATENCIES = ("p50 ms", "p99 ms", "p999 ms")


def draw(targets: list[Target], profile: Profile, out: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    throughput = [w for w in profile.workloads if w.kind in (PRODUCE, FETCH) and not w.rate]
    scaling = [w for w in throughput if w.kind == PRODUCE and w.acks == "1" and w.size == 1024]
    timed = [w for w in profile.workloads if w.kind == LATENCY or w.rate]
    return [
        _bars(targets, throughput, "MB/s", "Throughput, median of rounds (MB/s)",
              out / "throughput.png"),
        _scaling(targets, scaling, out / "partitions.png"),
        *(_bars(targets, [w], LATENCIES, f"{w.name}: latency (ms)",
                out / f"latency-{index}.png") for index, w in enumerate(timed, 1)),
    ]


def _bars(targets: list[Target], workloads: list[Workload], figures: str | tuple[str, ...],
          title: str, path: Path) -> Path:
    """Grouped bars: one group per (workload, figure), one bar per broker."""
    import matplotlib.pyplot as plt

    figures = (figures,) if isinstance(figures, str) else figures
    groups = [(w.name, f) for w in workloads for f in figures]
    width = 0.8 / max(1, len(targets))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups)), 4.5))
    for offset, target in enumerate(targets):
        heights = [target.median(name, figure) or 0.0 for name, figure in groups]
        ax.bar([i + offset * width for i in range(len(groups))], heights, width,
               label=target.name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
    ax.set_xticklabels([figure if len(figures) > 1 else name for name, figure in groups],
                       rotation=20, ha="right", fontsize=8)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scaling(targets: list[Target], workloads: list[Workload], path: Path) -> Path:
    """MB/s against the number of partitions, one line per broker."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for target in targets:
        points = [(w.partitions, target.median(w.name, "MB/s") or 0.0) for w in workloads
                  if target.results.get(w.name)]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", label=target.name)
    ax.set_xscale("log")
    ax.set_xlabel("partitions (records spread round-robin)")
    ax.set_ylabel("MB/s, median of rounds")
    ax.set_ylim(bottom=0)
    ax.set_title("Produce 1 KiB acks=1 against partitions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
