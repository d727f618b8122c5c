"""Suite-wide settings for every broker the tests start, and the ``slow`` marker."""
from pathlib import Path

import pytest

from commitgate.launcher import BrokerProcess

# suites of minutes each: Spark sessions and clusters, the whole compatibility matrix
SLOW_DIRECTORIES = ("pipeline", "compat")

# Small files: each test broker reserves its first CommitLog segment with fallocate (1 GiB by
# default) and its first IndexFile (about 420 MB), and a suite run starts dozens of brokers whose
# directories stay until pytest prunes them. 64 MiB segments still hold the 5 MiB records the
# tests send.
BrokerProcess.default_overrides = {"commitlog.segment.bytes": str(64 << 20),
                                   "index.hash.slots": "50000", "index.max.entries": "200000"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        if Path(item.fspath).relative_to(tests).parts[0] in SLOW_DIRECTORIES:
            item.add_marker(pytest.mark.slow)
