"""PeerLog: a few warnings per client address and interval, then a count of the rest."""
from __future__ import annotations

import logging
import time

from commitgate.gateway.network_stats import NetworkStats
from commitgate.gateway.peer_log import PeerLog


def test_warnings_beyond_the_burst_are_counted_and_summarised(caplog):
    stats = NetworkStats()
    peers = PeerLog(logging.getLogger("peer-log-test"), stats, burst=2, interval_s=0.05)
    with caplog.at_level(logging.WARNING, "peer-log-test"):
        for i in range(5):
            peers.warning("10.0.0.1", "bad request %d", i)
        peers.warning("10.0.0.2", "bad request from another")
        assert caplog.messages == ["bad request 0", "bad request 1", "bad request from another"]
        assert stats.warnings_suppressed == 3
        deadline = time.monotonic() + 30
        while len(caplog.messages) == 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
            peers.flush()
        assert caplog.messages[3:] == [
            "3 more warnings about requests from 10.0.0.1 in the last 0.05 s were suppressed"]
        peers.warning("10.0.0.1", "bad request again")  # a new interval: logged again
        assert caplog.messages[-1] == "bad request again"
