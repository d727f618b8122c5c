"""Suite-wide settings for every broker the tests start."""
from gateway.launcher import BrokerProcess

# 64 MiB CommitLog segments instead of 1 GiB: each test broker reserves its first segment with
# fallocate, and a suite run starts dozens of brokers (their directories stay until pytest
# prunes them). Big enough for the 5 MiB records the tests send.
BrokerProcess.default_overrides = {"commitlog.segment.bytes": str(64 << 20)}
