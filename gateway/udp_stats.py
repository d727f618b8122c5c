"""Counters of the UDP ingest (``Broker.udp``), read by /metrics and logged at shutdown."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

# why a datagram or its record was dropped (the ``reason`` label of the metric)
MALFORMED, OVERSIZE, UNKNOWN_TOPIC, REFUSED = "malformed", "oversize", "unknown_topic", "refused"


@dataclass
class UdpStats:
    received: int = 0  # datagrams read from the socket
    appended: int = 0  # records appended to a partition
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)

    def summary(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.dropped.items()))
        return (f"{self.received} datagrams received, {self.appended} records appended, "
                f"{sum(self.dropped.values())} dropped" + (f" ({reasons})" if reasons else ""))
