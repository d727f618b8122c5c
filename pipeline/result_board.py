"""What the reference pipeline shows: the latest count of each window and page read back from the
result topic, as a rich table (live) or as plain lines (logs)."""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text

from commitgate.pipeline.window_counts import WindowCount

WINDOWS_SHOWN = 3


@dataclass(frozen=True)
class Progress:
    produced: int  # click events sent
    results: int  # result records read back
    batches: int  # micro-batches the query finished
    watermark_ms: int | None  # the query's event-time watermark, once it has one
    status: str  # what the query is doing ("Processing new data", ...)

    def lines(self) -> tuple[str, str]:
        """The counts, then the query's watermark and status."""
        watermark = "-" if self.watermark_ms is None else clock(self.watermark_ms)
        counts = (f"events produced {self.produced:,} · results read {self.results:,} · "
                  f"micro-batches {self.batches:,}")
        return counts, f"watermark {watermark} · {self.status}"

    def describe(self) -> str:
        """lines() as one line, for logs."""
        return " · ".join(self.lines())


@dataclass
class ResultBoard:
    counts: dict[tuple[int, str], WindowCount] = field(default_factory=dict)
    results: int = 0

    def add(self, results: Iterable[WindowCount]) -> None:
        """Take result records in topic order: a later record of a window and page replaces it."""
        for result in results:
            self.counts[(result.window_start, result.page)] = result
            self.results += 1

    def latest(self) -> list[WindowCount]:
        """The counts of the latest windows, newest window first, most clicks first."""
        starts = sorted({start for start, _ in self.counts}, reverse=True)[:WINDOWS_SHOWN]
        shown = [c for c in self.counts.values() if c.window_start in starts]
        return sorted(shown, key=lambda c: (-c.window_start, -c.clicks, c.page))

    def view(self, progress: Progress) -> Group:
        """The table of the latest windows with the progress under it."""
        return Group(self.table(progress), *map(Text, progress.lines()))

    def table(self, progress: Progress) -> Table:
        """The latest windows: window, page, clicks."""
        table = Table(title="clicks per page and window (UTC)")
        table.add_column("window")
        table.add_column("page")
        table.add_column("clicks", justify="right")
        previous = None
        for count in self.latest():
            if previous is not None and count.window_start != previous:
                table.add_section()
            label = "" if count.window_start == previous else window_label(count, progress)
            table.add_row(label, count.page, f"{count.clicks:,}")
            previous = count.window_start
        return table


def window_label(count: WindowCount, progress: Progress) -> str:
    final = progress.watermark_ms is not None and progress.watermark_ms >= count.window_end
    span = f"{clock(count.window_start)}-{clock(count.window_end)}"
    return f"{span} final" if final else span


def result_line(count: WindowCount) -> str:
    """One result as a plain line, for --no-live."""
    return (f"window {clock(count.window_start)}-{clock(count.window_end)}  "
            f"page {count.page:<10} clicks {count.clicks}")


def clock(ms: int) -> str:
    """A time of day in UTC, with milliseconds when it has any."""
    text = time.strftime("%H:%M:%S", time.gmtime(ms // 1000))
    return f"{text}.{ms % 1000:03d}" if ms % 1000 else text
